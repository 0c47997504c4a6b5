package importer

import (
	"encoding/base64"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

// kopsGroup is the API group of kops' cluster and instance group specs.
const kopsGroup = "kops.k8s.io/"

// kopsComponents map the component sections of a kops cluster spec to kubeplug's
// control-plane components; kubelet and masterKubelet are node settings.
var kopsComponents = []struct{ field, table, to string }{
	{"kubeAPIServer", "apiServer", "apiServer"},
	{"kubeControllerManager", "controllerManager", "controllerManager"},
	{"kubeScheduler", "scheduler", "scheduler"},
}

// kopsRoles maps kops instance group roles to kubeplug node roles.
var kopsRoles = map[string]string{
	"Master":       "control-plane",
	"ControlPlane": "control-plane",
	"APIServer":    "control-plane",
	"Node":         "worker",
}

// kopsWhy says why known cluster spec fields have no place in a plugin.
var kopsWhy = map[string]string{
	"kubernetesVersion": "the cluster's Kubernetes version is cluster.yaml's spec.kubernetesVersion",
	"cloudProvider":     "the provider is cluster.yaml's spec.provider",
	"networking":        "the network plugin is a plugin of its own in kubeplug (enable one in cluster.yaml)",
	"etcdClusters":      "kubeplug's control-plane plugin runs etcd (see plugins/control-plane)",
	"subnets":           "the network layout is the provider's (cluster.yaml)",
	"kubeProxy":         "kube-proxy's configuration is not a kubeplug contribution",
	"kubeDNS":           "cluster DNS is the cluster-dns plugin's",
}

// FromKops imports a kops cluster spec (CLUSTER.yaml, as `kops get cluster -o
// yaml` or `kops get all -o yaml` writes it: a Cluster and optionally its
// InstanceGroups) as one plugin holding what kops adds to machines and the
// control plane: hooks become systemd units built the way kops' nodeup builds
// them, fileAssets become node files, and the component sections become
// control-plane and kubelet flags through kops' own flag names. Everything else
// in the spec (the cluster's shape: version, network, subnets, etcd) is listed in
// the README: it is cluster.yaml's, not a plugin's.
//
// Branches: a translation that follows docs/import.md's mapping table for this
// format row by row: one guarded step per source field, each refusing or listing
// what kubeplug cannot carry with its own message, so the code and the table can
// be read side by side.
func FromKops(input string, o Options) (*Result, error) {
	data, err := readFile(input)
	if err != nil {
		return nil, err
	}
	docs, err := decodeDocs(input, data)
	if err != nil {
		return nil, err
	}
	var cluster map[string]any
	var groups []map[string]any
	for i, d := range docs {
		if !strings.HasPrefix(str(d["apiVersion"]), kopsGroup) {
			return nil, fmt.Errorf("%s: document %d: %w: expected a kops Cluster (apiVersion %sv1alpha2), found apiVersion %q and kind %q", input, i+1, ErrFormat, kopsGroup, str(d["apiVersion"]), str(d["kind"]))
		}
		switch str(d["kind"]) {
		case "Cluster":
			if cluster != nil {
				return nil, fmt.Errorf("%s: document %d: a second Cluster; import one cluster at a time", input, i+1)
			}
			cluster = d
		case "InstanceGroup":
			groups = append(groups, d)
		default:
			return nil, fmt.Errorf("%s: document %d: kind %q is not a kops Cluster or InstanceGroup", input, i+1, str(d["kind"]))
		}
	}
	if cluster == nil {
		return nil, fmt.Errorf("%s: %w: no kops Cluster in the file", input, ErrFormat)
	}
	k := &kops{}
	k.r.Source = fmt.Sprintf("the kops cluster spec `%s`", base(input))
	md := asMap(cluster["metadata"])
	name, err := Name(&k.r, "metadata.name", str(md["name"]), 63)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", input, err)
	}
	k.p = newPackage(name, name, "0.1.0", "What the kops cluster "+str(md["name"])+" adds to machines and the control plane")
	k.r.Map("metadata.name", "`metadata.name`")
	k.r.Note("A kops cluster spec has no version of its own: the plugin starts at 0.1.0.")
	k.p.Files["original/"+base(input)] = data
	k.r.Original = []string{"`original/" + base(input) + "`: the kops cluster spec"}
	for _, key := range sortedKeys(md) {
		if key != "name" {
			k.r.Unmap("metadata."+key, "metadata of the kops object; a plugin has none")
		}
	}
	spec := asMap(cluster["spec"])
	k.hooks("spec.hooks", asList(pop(spec, "hooks")), nil)
	k.fileAssets("spec.fileAssets", asList(pop(spec, "fileAssets")), nil)
	for _, c := range kopsComponents {
		if m := asMap(pop(spec, c.field)); m != nil {
			flags := k.flags("spec."+c.field, c.table, m)
			if len(flags) > 0 {
				comp := k.p.component(c.to)
				for f, v := range flags {
					comp.Flags[f] = v
				}
				k.r.Map("spec."+c.field, fmt.Sprintf("`spec.contributes.controlPlane.%s.flags` (kops' flag names)", c.to))
			}
		}
	}
	if m := asMap(pop(spec, "kubelet")); m != nil {
		k.kubelet("spec.kubelet", k.flags("spec.kubelet", "kubelet", m), nil, nil)
	}
	if m := asMap(pop(spec, "masterKubelet")); m != nil {
		k.kubelet("spec.masterKubelet", k.flags("spec.masterKubelet", "kubelet", m), nil, []string{"control-plane"})
	}
	for _, key := range sortedKeys(spec) {
		why := kopsWhy[key]
		if why == "" {
			why = "part of the cluster's shape, not of what it adds to machines: carry it into cluster.yaml or a plugin by hand"
		}
		k.r.Unmap("spec."+key, "%s", why)
	}
	for _, g := range groups {
		k.group(g)
	}
	k.p.Report = k.r
	return &Result{Packages: []*Package{k.p}}, nil
}

// kops is one kops import under way.
type kops struct {
	p *Package
	r Report
}

// roles maps kops roles to kubeplug roles; unknown ones are reported.
func (k *kops) roles(field string, v any) ([]string, bool) {
	var out []string
	for _, r := range asList(v) {
		to, ok := kopsRoles[str(r)]
		if !ok {
			k.r.Unmap(field, "role %q has no kubeplug equivalent (kubeplug has control-plane and worker machines)", str(r))
			return nil, false
		}
		if !slices.Contains(out, to) {
			out = append(out, to)
		}
	}
	slices.Sort(out)
	return out, true
}

// nodeFor returns the node contribution of these roles and pools.
func (k *kops) nodeFor(roles, pools []string) *v1alpha1.NodeContribution {
	c := k.p.contributes()
	for i := range c.Nodes {
		if slices.Equal(c.Nodes[i].Roles, roles) && slices.Equal(c.Nodes[i].Pools, pools) {
			return &c.Nodes[i]
		}
	}
	c.Nodes = append(c.Nodes, v1alpha1.NodeContribution{Roles: roles, Pools: pools})
	return &c.Nodes[len(c.Nodes)-1]
}

// hooks maps kops hooks to systemd units, built as kops' nodeup builds them
// (nodeup/pkg/model/hooks.go): a unit of the manifest, or a oneshot unit running
// the execContainer's image with containerd.
func (k *kops) hooks(prefix string, hooks []any, pools []string) {
	for i, h := range hooks {
		hm := asMap(h)
		field := fmt.Sprintf("%s[%d]", prefix, i)
		name := str(hm["name"])
		if name == "" {
			name = fmt.Sprintf("kops-hook-%d", i)
		}
		if b, ok := hm["disabled"].(bool); ok && b {
			k.r.Unmap(field, "hook %s is disabled; not imported", name)
			continue
		}
		roles, ok := k.roles(field+".roles", hm["roles"])
		if !ok {
			continue
		}
		unit, err := kopsHookUnit(name, hm)
		if err != nil {
			k.r.Unmap(field, "%v", err)
			continue
		}
		unitName := name
		if !strings.HasSuffix(unitName, ".service") {
			unitName += ".service"
		}
		n := k.nodeFor(roles, pools)
		n.SystemdUnits = append(n.SystemdUnits, v1alpha1.SystemdUnit{Name: unitName, Content: literalTemplate(unit), Enable: true})
		k.r.Map(field+" "+name, fmt.Sprintf("`spec.contributes.nodes[%s].systemdUnits` %s (as nodeup writes it)", scope(roles, pools), unitName))
		for _, key := range sortedKeys(hm) {
			if !slices.Contains([]string{"name", "disabled", "roles", "requires", "before", "execContainer", "manifest", "useRawManifest"}, key) {
				k.r.Unmap(field+"."+key, "not a kops hook field")
			}
		}
	}
}

// kopsHookUnit renders a kops hook's systemd unit as nodeup does.
func kopsHookUnit(name string, hm map[string]any) (string, error) {
	manifest := str(hm["manifest"])
	exec := asMap(hm["execContainer"])
	if exec == nil && manifest == "" {
		return "", fmt.Errorf("hook %s has neither a manifest nor an execContainer (kops skips it too)", name)
	}
	if hm["useRawManifest"] == true {
		return manifest, nil
	}
	var u unitFile
	u.set("Unit", "Description", "Kops Hook "+name)
	for _, r := range asList(hm["requires"]) {
		u.set("Unit", "Requires", str(r))
	}
	for _, b := range asList(hm["before"]) {
		u.set("Unit", "Before", str(b))
	}
	if exec == nil {
		u.section("Service").content = manifest
		return u.render(), nil
	}
	image := strings.TrimSpace(str(exec["image"]))
	if image == "" {
		return "", fmt.Errorf("hook %s: execContainer has no image (kops skips it too)", name)
	}
	if !strings.Contains(image, "/") {
		image = "docker.io/library/" + image
	}
	if !strings.Contains(image, ":") {
		image += ":latest"
	}
	args := []string{
		"/usr/bin/ctr", "--namespace", "k8s.io", "run", "--rm",
		"--mount", "type=bind,src=/,dst=/rootfs,options=rbind:rslave",
		"--mount", "type=bind,src=/var/run/dbus,dst=/var/run/dbus,options=rbind:rprivate",
		"--mount", "type=bind,src=/run/systemd,dst=/run/systemd,options=rbind:rprivate",
		"--net-host", "--privileged",
	}
	env := asMap(exec["environment"])
	for _, key := range sortedKeys(env) {
		args = append(args, "--env", key+"="+str(env[key]))
	}
	args = append(args, image, name)
	for _, c := range asList(exec["command"]) {
		args = append(args, str(c))
	}
	u.set("Unit", "Requires", "containerd.service")
	u.set("Service", "ExecStartPre", systemdCommand([]string{"/usr/bin/ctr", "--namespace", "k8s.io", "image", "pull", image}))
	u.set("Service", "ExecStart", systemdCommand(args))
	u.set("Service", "Type", "oneshot")
	u.set("Install", "WantedBy", "multi-user.target")
	return u.render(), nil
}

// unitFile is a systemd unit built section by section, in the order sections are
// first used.
type unitFile struct{ sections []*unitSection }

type unitSection struct {
	name, content string
	entries       []string
}

func (u *unitFile) section(name string) *unitSection {
	for _, s := range u.sections {
		if s.name == name {
			return s
		}
	}
	s := &unitSection{name: name}
	u.sections = append(u.sections, s)
	return s
}

func (u *unitFile) set(section, key, value string) {
	s := u.section(section)
	s.entries = append(s.entries, key+"="+value+"\n")
}

func (u *unitFile) render() string {
	var b strings.Builder
	for i, s := range u.sections {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString("[" + s.name + "]\n" + s.content)
		for _, e := range s.entries {
			b.WriteString(e)
		}
	}
	return b.String()
}

// systemdCommand quotes an argv for a unit's Exec line: an argument with a space
// is double-quoted; quotes and backslashes are escaped.
func systemdCommand(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		e := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `'`, `\'`).Replace(a)
		if strings.Contains(a, " ") {
			e = `"` + e + `"`
		}
		out[i] = e
	}
	return strings.Join(out, " ")
}

// literalTemplate makes text render as itself through kubeplug's templates.
func literalTemplate(text string) string {
	if !strings.Contains(text, "{{") {
		return text
	}
	return strings.ReplaceAll(text, "{{", "{{`{{`}}")
}

// fileAssets maps kops fileAssets to node files.
func (k *kops) fileAssets(prefix string, assets []any, pools []string) {
	for i, a := range assets {
		am := asMap(a)
		field := fmt.Sprintf("%s[%d]", prefix, i)
		p := str(am["path"])
		if !path.IsAbs(p) {
			k.r.Unmap(field, "path %q is not absolute", p)
			continue
		}
		roles, ok := k.roles(field+".roles", am["roles"])
		if !ok {
			continue
		}
		f := v1alpha1.NodeFile{Path: p}
		if m := str(am["mode"]); m != "" {
			if _, err := strconv.ParseUint(m, 8, 32); err != nil || len(m) > 4 {
				k.r.Unmap(field+".mode", "%q is not an octal mode", m)
				continue
			}
			f.Mode = m
		}
		content := str(am["content"])
		if am["isBase64"] == true {
			data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(content))
			if err != nil {
				k.r.Unmap(field+".content", "isBase64 is set but the content is not base64: %v", err)
				continue
			}
			name := str(am["name"])
			if name == "" {
				name = path.Base(p)
			}
			rel, err := k.p.addFile(field, "files/"+path.Base(name), data)
			if err != nil {
				k.r.Unmap(field, "%v", err)
				continue
			}
			f.Source = rel
		} else {
			f.Content = literalTemplate(content)
		}
		n := k.nodeFor(roles, pools)
		n.Files = append(n.Files, f)
		k.r.Map(field+" "+p, fmt.Sprintf("`spec.contributes.nodes[%s].files`", scope(roles, pools)))
		for _, key := range sortedKeys(am) {
			if !slices.Contains([]string{"name", "path", "roles", "content", "isBase64", "mode"}, key) {
				k.r.Unmap(field+"."+key, "not a kops fileAsset field")
			}
		}
	}
}

// flags renders a component section as flags through kops' flag table; fields
// that are no flag, or that kops would repeat, are reported.
func (k *kops) flags(prefix, table string, m map[string]any) map[string]string {
	out := map[string]string{}
	for _, key := range sortedKeys(m) {
		field := prefix + "." + key
		flag, known := kopsFlags[table][key]
		switch {
		case !known:
			k.r.Unmap(field, "not a field kops knows for this component")
			continue
		case flag == "":
			k.r.Unmap(field, "kops uses it itself (an image, a file, its own logic), not as a flag")
			continue
		}
		name, repeat := strings.CutSuffix(flag, ",repeat")
		v, ok := flagValue(m[key])
		if !ok {
			k.r.Unmap(field, "a value of this shape has no flag form")
			continue
		}
		if l := asList(m[key]); repeat && len(l) > 1 {
			k.r.Unmap(field, "kops repeats --%s once per item; kubeplug sets a flag once", name)
			continue
		}
		out[name] = v
	}
	return out
}

// flagValue renders a kops value as a flag value: lists joined with commas, maps
// as sorted k=v pairs, as kops does.
func flagValue(v any) (string, bool) {
	switch t := v.(type) {
	case string:
		return t, true
	case bool:
		return strconv.FormatBool(t), true
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64), true
	case []any:
		parts := make([]string, len(t))
		for i, e := range t {
			s, ok := flagValue(e)
			if !ok {
				return "", false
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), true
	case map[string]any:
		var parts []string
		for _, key := range sortedKeys(t) {
			s, ok := flagValue(t[key])
			if !ok {
				return "", false
			}
			parts = append(parts, key+"="+s)
		}
		return strings.Join(parts, ","), true
	}
	return "", false
}

// kubelet adds kubelet flags to the machines of roles and pools.
func (k *kops) kubelet(field string, flags map[string]string, pools, roles []string) {
	if len(flags) == 0 {
		return
	}
	n := k.nodeFor(roles, pools)
	if n.Kubelet == nil {
		n.Kubelet = &v1alpha1.Kubelet{}
	}
	if n.Kubelet.Flags == nil {
		n.Kubelet.Flags = map[string]string{}
	}
	for f, v := range flags {
		n.Kubelet.Flags[f] = v
	}
	k.r.Map(field, fmt.Sprintf("`spec.contributes.nodes[%s].kubelet.flags` (kops' flag names)", scope(roles, pools)))
}

// group maps what an InstanceGroup adds to its machines, limited to the node
// pool of the same name.
func (k *kops) group(g map[string]any) {
	name := str(asMap(g["metadata"])["name"])
	pool, err := Name(&k.r, "InstanceGroup "+name+" metadata.name", name, 63)
	if err != nil {
		k.r.Unmap("InstanceGroup "+name, "%v", err)
		return
	}
	for _, key := range sortedKeys(asMap(g["metadata"])) {
		if key != "name" {
			k.r.Unmap("InstanceGroup "+name+" metadata."+key, "metadata of the kops object; a plugin has none")
		}
	}
	prefix := "InstanceGroup " + name + " spec"
	spec := asMap(g["spec"])
	pools := []string{pool}
	k.hooks(prefix+".hooks", asList(pop(spec, "hooks")), pools)
	k.fileAssets(prefix+".fileAssets", asList(pop(spec, "fileAssets")), pools)
	if m := asMap(pop(spec, "kubelet")); m != nil {
		k.kubelet(prefix+".kubelet", k.flags(prefix+".kubelet", "kubelet", m), pools, nil)
	}
	for _, key := range sortedKeys(spec) {
		k.r.Unmap(prefix+"."+key, "the machines of a node pool are cluster.yaml's (spec.nodePools) and the provider's")
	}
}

// scope names the roles and pools of a node contribution in the README.
func scope(roles, pools []string) string {
	var parts []string
	if len(roles) > 0 {
		parts = append(parts, "roles "+strings.Join(roles, ","))
	}
	if len(pools) > 0 {
		parts = append(parts, "pools "+strings.Join(pools, ","))
	}
	if len(parts) == 0 {
		return "every machine"
	}
	return strings.Join(parts, ", ")
}
