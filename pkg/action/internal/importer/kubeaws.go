package importer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

// kubeAWSConfigKey is the plugin value that holds what kube-aws templates read
// from the cluster's own configuration (.Config.X): kubeplug has no such data, so
// each becomes a value the user sets.
const kubeAWSConfigKey = "kubeAwsConfig"

// kubeAWSRename are the .Config fields kubeplug has an equivalent of.
var kubeAWSRename = map[string]string{
	"ClusterName": ".Cluster.Metadata.Name",
}

// kubeAWSRoles maps kube-aws machine roles to kubeplug node roles. kube-aws runs
// etcd on machines of its own; kubeplug runs it on the control plane.
var kubeAWSRoles = []struct{ from, to string }{
	{"controller", "control-plane"},
	{"etcd", "control-plane"},
	{"worker", "worker"},
}

// kubeAWSWhy says why known kube-aws fields have no place in a plugin.
var kubeAWSWhy = map[string]string{
	"spec.cluster.pki":                    "kube-aws generates these key pairs into its credentials directory for templates to read; kubeplug issues a plugin's key pairs (spec.contributes.keyPairs) as files on its machines only, never as bytes a template reads: declare those the machines use by hand, and for a Secret (kiam's TLS Secrets) use a served API's serving certificate or cert-manager",
	"spec.cluster.kubernetes.kubeProxy":   "kube-proxy's configuration is not a kubeplug contribution",
	"metadata.clusterSettingsKey":         "kube-aws cluster.yaml plumbing; kubeplug enables plugins by name in cluster.yaml",
	"metadata.nodePoolSettingKey":         "kube-aws cluster.yaml plumbing; kubeplug's per-pool values are set in cluster.yaml",
	"kubelet.kubeconfig":                  "the kubelet's kubeconfig is the provider's; kubeplug has no setting for it",
	"kubelet.mounts":                      "kube-aws ran the kubelet in a container (rkt/docker mounts); kubeplug's kubelet runs on the host",
	"cloudformation.stacks.*.tags":        "stack tags are not a kubeplug cloud contribution",
	"source.url":                          "kube-aws downloads this at render time; put the file into the plugin directory (source.path) before importing",
	"source.path outside the plugin":      "the file is outside the plugin directory (kube-aws credentials/ or another plugin); kubeplug packages are self-contained",
	"helm.releases[].chart by repository": "the chart is named by repository only; pull it into a --charts directory (helm pull REPO/NAME --version V) and import again",
}

// FromKubeAWS imports a kube-aws plugin directory (plugin.yaml with
// spec.cluster.*) as one plugin. Every field of spec.cluster either lands in the
// plugin (see docs/import.md) or is listed in the README; kube-aws templates are
// kept as kubeplug templates, .Values unchanged and .Config fields turned into
// values the user sets.
//
// Branches: a translation that follows docs/import.md's mapping table for this
// format row by row: one guarded step per source field, each refusing or listing
// what kubeplug cannot carry with its own message, so the code and the table can
// be read side by side.
func FromKubeAWS(input string, o Options) (*Result, error) {
	dir := input
	if fi, err := os.Stat(input); err == nil && !fi.IsDir() {
		dir = filepath.Dir(input)
	}
	file := filepath.Join(dir, "plugin.yaml")
	data, err := readFile(file)
	if err != nil {
		return nil, err
	}
	raw, err := decodeMap(file, data)
	if err != nil {
		return nil, err
	}
	md, _ := raw["metadata"].(map[string]any)
	spec, _ := raw["spec"].(map[string]any)
	cluster, _ := spec["cluster"].(map[string]any)
	if raw["apiVersion"] != nil || raw["kind"] != nil || md == nil || spec == nil || cluster == nil {
		return nil, fmt.Errorf("%s: %w: expected a kube-aws plugin (metadata.name, metadata.version and spec.cluster, no apiVersion or kind)", file, ErrFormat)
	}
	k := &kubeAWS{dir: dir, file: file, o: o}
	k.r.Source = fmt.Sprintf("the kube-aws plugin `%s`", base(dir))
	name, err := Name(&k.r, "metadata.name", str(pop(md, "name")), 63)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	version, err := Version(&k.r, "metadata.version", str(pop(md, "version")))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	k.p = newPackage(name, name, version, str(pop(md, "description")))
	if k.p.Manifest.Metadata.Description == "" {
		k.p.Manifest.Metadata.Description = "Imported from the kube-aws plugin " + name
	}
	k.r.Map("metadata.name, version, description", "`metadata`")
	k.p.Files["original/plugin.yaml"] = data
	k.r.Original = []string{"`original/plugin.yaml`: the kube-aws plugin.yaml"}
	k.values(pop(cluster, "values"))
	k.kubernetes(asMap(pop(cluster, "kubernetes")))
	if err := k.helm(asMap(pop(cluster, "helm"))); err != nil {
		return nil, err
	}
	k.machines(asMap(pop(cluster, "machine")))
	k.cloudformation(asMap(pop(cluster, "cloudformation")))
	k.leftovers("metadata", md)
	delete(spec, "cluster")
	k.leftovers("spec.cluster", cluster)
	k.leftovers("spec", spec)
	for _, key := range sortedKeys(raw) {
		if key != "metadata" && key != "spec" {
			k.r.Unmap(key, "not a kube-aws plugin field")
		}
	}
	if len(k.aws) > 0 {
		// AWS-only parts make an AWS-only plugin: said so, the resolver refuses it
		// on another provider and lint renders it for AWS.
		k.p.Manifest.Spec.Providers = []string{"aws"}
		k.r.Map("(provider): the plugin uses AWS-only parts ("+strings.Join(k.aws, ", ")+")", "`spec.providers: [aws]`")
	}
	if len(k.config) > 0 {
		defaults := k.defaults()
		cfg := map[string]any{}
		for _, ref := range sortedKeys(k.config) {
			var empty any = ""
			if k.lists[ref] {
				empty = []any{}
			}
			setPath(cfg, strings.TrimPrefix(k.config[ref], ".Values."+kubeAWSConfigKey+"."), empty)
		}
		defaults[kubeAWSConfigKey] = cfg
		k.r.Note("kube-aws templates read the cluster's configuration (.Config); kubeplug has none, so each field read is now the value `%s.FIELD`, empty (a list where a template ranges over it) by default: set them in cluster.yaml. %s", kubeAWSConfigKey, joinRefs(k.config))
	}
	k.p.Report = k.r
	return &Result{Packages: []*Package{k.p}}, nil
}

// kubeAWS is one kube-aws import under way.
type kubeAWS struct {
	dir, file string
	o         Options
	p         *Package
	r         Report
	// config are the .Config fields templates read, by source ref, with their
	// kubeplug ref.
	config map[string]string
	// lists are the .Config fields templates range over.
	lists map[string]bool
	// aws lists the AWS-only parts the plugin uses.
	aws []string
	// iamNoted: the README says where IAM statements take effect.
	iamNoted bool
	// binaryNoted: the README says where binaries' digests come from.
	binaryNoted bool
}

func (k *kubeAWS) defaults() v1alpha1.Values {
	if k.p.Manifest.Spec.Values == nil {
		k.p.Manifest.Spec.Values = &v1alpha1.ValuesSpec{}
	}
	if k.p.Manifest.Spec.Values.Defaults == nil {
		k.p.Manifest.Spec.Values.Defaults = v1alpha1.Values{}
	}
	return k.p.Manifest.Spec.Values.Defaults
}

func (k *kubeAWS) values(v any) {
	m := asMap(v)
	if len(m) == 0 {
		return
	}
	d := k.defaults()
	for key, val := range m {
		d[key] = val
	}
	k.r.Map("spec.cluster.values", "`spec.values.defaults` (templates read them as .Values, as in kube-aws)")
}

// tpl translates a kube-aws template at field; ok is false (and the field
// reported) when kubeplug cannot render it.
func (k *kubeAWS) tpl(field, text string) (string, bool) {
	out, refs, err := templateRewrite(text, "Config", kubeAWSConfigKey, kubeAWSRename)
	if err != nil {
		k.r.Unmap(field, "%v", err)
		return "", false
	}
	for _, ref := range refs {
		if k.config == nil {
			k.config = map[string]string{}
		}
		if strings.HasPrefix(ref.Target, ".Values.") {
			k.config[ref.Source] = ref.Target
			if ref.List {
				if k.lists == nil {
					k.lists = map[string]bool{}
				}
				k.lists[ref.Source] = true
			}
		} else if !slices.ContainsFunc(k.r.Mapped, func(m Mapping) bool { return m.From == ref.Source }) {
			k.r.Map(ref.Source, "`"+ref.Target+"`")
		}
	}
	return out, true
}

var kubeAWSComponents = []struct{ from, to string }{
	{"apiserver", "apiServer"},
	{"controllerManager", "controllerManager"},
	{"kubeScheduler", "scheduler"},
}

// Branches: a translation that follows docs/import.md's mapping table for this
// format row by row: one guarded step per source field, each refusing or listing
// what kubeplug cannot carry with its own message, so the code and the table can
// be read side by side.
func (k *kubeAWS) kubernetes(m map[string]any) {
	for _, c := range kubeAWSComponents {
		comp := asMap(m[c.from])
		if comp == nil {
			continue
		}
		for i, f := range asList(pop(comp, "flags")) {
			fm := asMap(f)
			field := fmt.Sprintf("spec.cluster.kubernetes.%s.flags[%d]", c.from, i)
			name := strings.TrimLeft(str(fm["name"]), "-")
			if v, ok := k.tpl(field, str(fm["value"])); ok && name != "" {
				k.p.component(c.to).Flags[name] = v
				k.r.Map(field+" "+name, fmt.Sprintf("`spec.contributes.controlPlane.%s.flags.%s`", c.to, name))
			}
		}
		for i, v := range asList(pop(comp, "volumes")) {
			vm := asMap(v)
			field := fmt.Sprintf("spec.cluster.kubernetes.%s.volumes[%d]", c.from, i)
			p := str(vm["path"])
			vn, err := Name(&k.r, field+".name", str(vm["name"]), 63)
			if err != nil || !path.IsAbs(p) {
				k.r.Unmap(field, "a volume needs a name and an absolute path")
				continue
			}
			comp := k.p.component(c.to)
			comp.Volumes = append(comp.Volumes, v1alpha1.HostPathVolume{Name: vn, HostPath: p, MountPath: p, ReadOnly: vm["readOnly"] == true})
			k.r.Map(field, fmt.Sprintf("`spec.contributes.controlPlane.%s.volumes` (host path mounted at the same path)", c.to))
		}
		k.leftovers("spec.cluster.kubernetes."+c.from, comp)
		delete(m, c.from)
	}
	if kl := asMap(m["kubelet"]); kl != nil {
		for i, f := range asList(pop(kl, "flags")) {
			fm := asMap(f)
			field := fmt.Sprintf("spec.cluster.kubernetes.kubelet.flags[%d]", i)
			name := strings.TrimLeft(str(fm["name"]), "-")
			if v, ok := k.tpl(field, str(fm["value"])); ok && name != "" {
				n := k.p.node()
				if n.Kubelet == nil {
					n.Kubelet = &v1alpha1.Kubelet{}
				}
				if n.Kubelet.Flags == nil {
					n.Kubelet.Flags = map[string]string{}
				}
				n.Kubelet.Flags[name] = v
				k.r.Map(field+" "+name, "`spec.contributes.nodes[].kubelet.flags."+name+"` (every machine)")
			}
		}
		k.leftovers("spec.cluster.kubernetes.kubelet", kl)
		delete(m, "kubelet")
	}
	for i, mf := range asList(pop(m, "manifests")) {
		field := fmt.Sprintf("spec.cluster.kubernetes.manifests[%d]", i)
		text, name, ok := k.content(field, asMap(mf))
		if !ok {
			continue
		}
		if name == "" {
			name = fmt.Sprintf("manifest-%d.yaml", i)
		}
		out, ok := k.tpl(field, text)
		rel := "manifests/" + path.Base(name)
		if !ok {
			k.p.Files["unmapped/"+path.Base(name)] = []byte(text)
			k.r.Unmapped[len(k.r.Unmapped)-1].Why += "; kept as `unmapped/" + path.Base(name) + "`, not installed"
			continue
		}
		out, rewrites, unported := upgradeAPIs(out)
		if len(unported) > 0 {
			k.p.Files["unmapped/"+path.Base(name)] = []byte(text)
			k.r.Unmap(field, "uses APIs the cluster's Kubernetes no longer serves and that cannot be renamed safely: %s; kept as `unmapped/%s`, not installed", strings.Join(unported, ", "), path.Base(name))
			continue
		}
		for _, rw := range rewrites {
			k.r.Normalised = append(k.r.Normalised, Normalised{Field: field + " apiVersion", Original: strings.SplitN(rw, " ", 2)[0], Value: rw[strings.LastIndex(rw, " ")+1:],
				Rule: "an API Kubernetes no longer serves, renamed to its replacement of the same shape"})
		}
		if _, dup := k.p.Files[rel]; dup {
			rel = fmt.Sprintf("manifests/%02d-%s", i, path.Base(name))
		}
		k.p.Files[rel] = []byte(out)
		kube := k.p.kubernetes()
		if !slices.Contains(kube.Manifests, "manifests/") {
			kube.Manifests = append(kube.Manifests, "manifests/")
		}
		k.r.Map(field, "`"+rel+"`")
	}
	k.leftovers("spec.cluster.kubernetes", m)
}

// content returns the text of a kube-aws remote file spec (content, template or
// source.path inside the plugin directory) and the name of its source file;
// ok is false when there is none, with the field reported.
func (k *kubeAWS) content(field string, f map[string]any) (text, name string, ok bool) {
	if c, isStr := f["content"].(string); isStr && c != "" {
		return c, str(f["name"]), true
	}
	if c, isStr := f["template"].(string); isStr && c != "" {
		return c, str(f["name"]), true
	}
	src := asMap(f["source"])
	p := str(src["path"])
	if p == "" {
		if u := str(src["url"]); u != "" {
			k.r.Unmap(field+".source.url", "%s (%s)", kubeAWSWhy["source.url"], u)
		} else {
			k.r.Unmap(field, "no content, template or source.path")
		}
		return "", "", false
	}
	data, err := k.read(p)
	if err != nil {
		why := kubeAWSWhy["source.path outside the plugin"]
		if !isOutside(err) {
			why = err.Error()
		}
		if u := str(src["url"]); u != "" {
			why += "; " + kubeAWSWhy["source.url"] + " (" + u + ")"
		}
		k.r.Unmap(field+".source.path", "%s: %s", p, why)
		return "", "", false
	}
	return string(data), p, true
}

// errOutside marks a path outside the plugin directory.
type errOutside struct{}

func (errOutside) Error() string { return "outside the plugin directory" }

// isOutside says whether err is errOutside.
func isOutside(err error) bool { return errors.As(err, new(errOutside)) }

// read reads a file of the plugin directory by its relative path.
func (k *kubeAWS) read(p string) ([]byte, error) {
	clean := path.Clean(p)
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return nil, errOutside{}
	}
	data, err := readFile(filepath.Join(k.dir, filepath.FromSlash(clean)))
	if err != nil {
		return nil, fmt.Errorf("not in the plugin directory")
	}
	return data, nil
}

func (k *kubeAWS) helm(m map[string]any) error {
	for i, rel := range asList(pop(m, "releases")) {
		rm := asMap(rel)
		field := fmt.Sprintf("spec.cluster.helm.releases[%d]", i)
		chart, version := str(rm["chart"]), str(rm["version"])
		name, err := Name(&k.r, field+".name", str(rm["name"]), 53)
		if err != nil {
			return fmt.Errorf("%s: %w", k.file, err)
		}
		files, from, err := k.chart(chart, version)
		if err != nil {
			k.r.Unmap(field, "chart %s %s: %v", chart, version, err)
			continue
		}
		cm, _, err := readChart(from+"/Chart.yaml", files)
		if err != nil {
			return err
		}
		dir := "charts/" + cm.Name
		for f, data := range files {
			k.p.Files[dir+"/"+f] = data
		}
		ns := k.o.Namespace
		if ns == "" {
			ns = "kube-system"
		}
		vals, _ := literal(&k.r, field+".values", asMap(rm["values"])).(map[string]any)
		if len(vals) == 0 {
			vals = nil
		}
		kube := k.p.kubernetes()
		kube.HelmReleases = append(kube.HelmReleases, v1alpha1.HelmRelease{Name: name, Chart: dir, Namespace: ns, Values: vals})
		k.r.Map(field, fmt.Sprintf("`spec.contributes.kubernetes.helmReleases`: release `%s` of chart `%s` (%s %s) in namespace `%s`", name, dir, cm.Name, cm.Version, ns))
		for _, key := range sortedKeys(rm) {
			if !slices.Contains([]string{"name", "chart", "version", "values"}, key) {
				k.r.Unmap(field+"."+key, "not a kube-aws Helm release field")
			}
		}
	}
	k.leftovers("spec.cluster.helm", m)
	return nil
}

// chart finds a kube-aws release's chart: a directory or archive in the plugin
// directory, else REPO/NAME in the --charts directory.
func (k *kubeAWS) chart(chart, version string) (map[string][]byte, string, error) {
	if _, err := k.read(path.Join(chart, "Chart.yaml")); err == nil {
		tree, err := readTree(filepath.Join(k.dir, filepath.FromSlash(chart)))
		return tree, chart, err
	}
	if strings.HasSuffix(chart, ".tgz") {
		if _, err := k.read(chart); err == nil {
			p := filepath.Join(k.dir, filepath.FromSlash(chart))
			tree, err := readTree(p)
			if err != nil {
				return nil, "", err
			}
			root, err := chartRoot(p, tree)
			if err != nil {
				return nil, "", err
			}
			return subtree(tree, root), chart, nil
		}
	}
	if k.o.Charts == "" {
		return nil, "", fmt.Errorf("%s", kubeAWSWhy["helm.releases[].chart by repository"])
	}
	repo, name := path.Split(chart)
	return findChart(k.o.Charts, name, version, strings.TrimSuffix(repo, "/"))
}

// Branches: a translation that follows docs/import.md's mapping table for this
// format row by row: one guarded step per source field, each refusing or listing
// what kubeplug cannot carry with its own message, so the code and the table can
// be read side by side.
func (k *kubeAWS) machines(m map[string]any) {
	roles := asMap(m["roles"])
	for _, role := range kubeAWSRoles {
		rm := asMap(roles[role.from])
		if rm == nil {
			continue
		}
		prefix := "spec.cluster.machine.roles." + role.from
		n := k.p.node(role.to)
		if role.from == "etcd" {
			k.r.Normalised = append(k.r.Normalised, Normalised{Field: prefix, Original: "etcd machines", Value: "control-plane machines", Rule: "kubeplug runs etcd on the control-plane machines"})
		}
		for i, f := range asList(pop(rm, "files")) {
			k.file1(fmt.Sprintf("%s.files[%d]", prefix, i), asMap(f), n, role.to)
		}
		if iam := asMap(rm["iam"]); iam != nil {
			pol := asMap(iam["policy"])
			var stmts []map[string]any
			for i, s := range asList(pop(pol, "statements")) {
				sm := asMap(s)
				st := map[string]any{"Effect": str(sm["effect"]), "Action": sm["actions"], "Resource": sm["resources"]}
				if st["Effect"] == "" {
					st["Effect"] = "Allow"
				}
				stmts = append(stmts, st)
				for _, key := range sortedKeys(sm) {
					if key != "effect" && key != "actions" && key != "resources" {
						k.r.Unmap(fmt.Sprintf("%s.iam.policy.statements[%d].%s", prefix, i, key), "not a kube-aws IAM statement field")
					}
				}
			}
			if len(stmts) > 0 {
				k.iam(role.to, stmts)
				k.r.Map(prefix+".iam.policy.statements", "`spec.contributes.cloud.iam` (role `"+role.to+"`)")
				// Not AWS-only: the rest of such a plugin (flags, files, charts)
				// works on any provider, and a provider without a cloud template
				// renders the statements without deploying them. Only
				// CloudFormation resources make a plugin AWS's alone.
				if !k.iamNoted {
					k.iamNoted = true
					k.r.Note("The IAM statements take effect where the cloud template is deployed (the aws provider); the local provider renders them into `cloud/template.json` and deploys nothing of it.")
				}
			}
			k.leftovers(prefix+".iam.policy", pol)
			delete(iam, "policy")
			k.leftovers(prefix+".iam", iam)
			delete(rm, "iam")
		}
		if sd := asMap(rm["systemd"]); sd != nil {
			for i, u := range asList(pop(sd, "units")) {
				um := asMap(u)
				field := fmt.Sprintf("%s.systemd.units[%d]", prefix, i)
				text, _, ok := k.content(field, um)
				if !ok {
					continue
				}
				out, ok := k.tpl(field, text)
				if !ok {
					continue
				}
				name := str(um["name"])
				if i := slices.IndexFunc(n.SystemdUnits, func(u v1alpha1.SystemdUnit) bool { return u.Name == name }); i >= 0 {
					if n.SystemdUnits[i].Content != out {
						k.r.Unmap(field, "%s: the %s machines already get this unit from another kube-aws role", name, role.to)
					}
					continue
				}
				n.SystemdUnits = append(n.SystemdUnits, v1alpha1.SystemdUnit{Name: name, Content: out, Enable: strings.Contains(out, "[Install]")})
				k.r.Map(field, "`spec.contributes.nodes[roles "+role.to+"].systemdUnits` "+name)
			}
			k.leftovers(prefix+".systemd", sd)
			delete(rm, "systemd")
		}
		if kl := asMap(rm["kubelet"]); kl != nil {
			if labels := asMap(pop(kl, "nodeLabels")); len(labels) > 0 {
				if n.Kubelet == nil {
					n.Kubelet = &v1alpha1.Kubelet{}
				}
				n.Kubelet.Labels = map[string]string{}
				for key, v := range labels {
					n.Kubelet.Labels[key] = str(v)
				}
				k.r.Map(prefix+".kubelet.nodeLabels", "`spec.contributes.nodes[roles "+role.to+"].kubelet.labels`")
			}
			if gates := asMap(pop(kl, "featureGates")); len(gates) > 0 {
				if n.Kubelet == nil {
					n.Kubelet = &v1alpha1.Kubelet{}
				}
				n.Kubelet.FeatureGates = map[string]bool{}
				for key, v := range gates {
					b, err := strconv.ParseBool(str(v))
					if err != nil {
						k.r.Unmap(prefix+".kubelet.featureGates."+key, "%q is not true or false", str(v))
						continue
					}
					n.Kubelet.FeatureGates[key] = b
				}
				k.r.Map(prefix+".kubelet.featureGates", "`spec.contributes.nodes[roles "+role.to+"].kubelet.featureGates`")
			}
			for _, key := range sortedKeys(kl) {
				why := kubeAWSWhy["kubelet."+key]
				if why == "" {
					why = "not a kube-aws kubelet setting the import knows"
				}
				k.r.Unmap(prefix+".kubelet."+key, "%s", why)
			}
			delete(rm, "kubelet")
		}
		k.leftovers(prefix, rm)
		delete(roles, role.from)
	}
	// Drop node contributions that ended up empty (a role with only unmapped
	// fields).
	if c := k.p.Manifest.Spec.Contributes; c != nil {
		c.Nodes = slices.DeleteFunc(c.Nodes, func(n v1alpha1.NodeContribution) bool {
			return len(n.Files) == 0 && len(n.SystemdUnits) == 0 && n.Kubelet == nil && len(n.Hooks) == 0
		})
	}
	delete(m, "roles")
	k.leftovers("spec.cluster.machine.roles", roles)
	k.leftovers("spec.cluster.machine", m)
}

// file1 maps one kube-aws machine file.
func (k *kubeAWS) file1(field string, f map[string]any, n *v1alpha1.NodeContribution, role string) {
	p := str(f["path"])
	if !path.IsAbs(p) {
		k.r.Unmap(field, "path %q is not absolute", p)
		return
	}
	nf := v1alpha1.NodeFile{Path: p}
	if perm, ok := f["permissions"].(float64); ok && perm > 0 {
		nf.Mode = fmt.Sprintf("%04o", int(perm))
	}
	if !k.fileSource(field, f, &nf) {
		return
	}
	if i := slices.IndexFunc(n.Files, func(f v1alpha1.NodeFile) bool { return f.Path == p }); i >= 0 {
		if n.Files[i] != nf {
			k.r.Unmap(field, "%s: the %s machines already get a file at this path from another kube-aws role", p, role)
		}
		return
	}
	n.Files = append(n.Files, nf)
	k.r.Map(field+" "+p, "`spec.contributes.nodes[roles "+role+"].files`")
}

// fileSource sets where nf's bytes come from: a url pinned by its digest (a
// type: binary file with a source.url), a copy of a binary in the plugin
// directory, or the file's text as a template. ok is false when there is
// none, with the field reported.
func (k *kubeAWS) fileSource(field string, f map[string]any, nf *v1alpha1.NodeFile) bool {
	src := asMap(f["source"])
	if u := str(src["url"]); str(f["type"]) == "binary" && u != "" {
		sum, ok := k.binaryDigest(field, str(src["path"]), u)
		if !ok {
			return false
		}
		nf.URL, nf.SHA256 = u, sum
		if !k.binaryNoted {
			k.binaryNoted = true
			k.r.Note("type: binary files keep their url, pinned by a sha256 the import computed (kube-aws gives none): of the file at source.path when the plugin directory holds kube-aws's download, else of what the url served at the import. Check it against the digest the binary's publisher gives before trusting it.")
		}
	} else if str(f["type"]) == "binary" && str(src["path"]) != "" {
		data, err := k.read(str(src["path"]))
		if err != nil {
			why := err.Error()
			if isOutside(err) {
				why = kubeAWSWhy["source.path outside the plugin"]
			}
			k.r.Unmap(field, "%s: %s", str(src["path"]), why)
			return false
		}
		rel, _ := k.p.addFile(field, "files/"+strings.TrimPrefix(path.Clean(str(src["path"])), "files/"), data)
		nf.Source = rel
	} else {
		text, _, ok := k.content(field, f)
		if !ok {
			return false
		}
		out, ok := k.tpl(field, text)
		if !ok {
			return false
		}
		nf.Content = out
	}
	return true
}

// binaryDigest is the SHA-256 a kube-aws type: binary file's url is pinned
// by: of the file at source.path when the plugin directory holds it (where
// kube-aws keeps what it downloaded from the url), else of what the url
// serves, downloaded once. kube-aws's file source has no digest of its own.
// ok is false when there is neither, with the field reported.
func (k *kubeAWS) binaryDigest(field, local, url string) (sum string, ok bool) {
	if !strings.HasPrefix(url, "https://") && !strings.HasPrefix(url, "http://") {
		k.r.Unmap(field, "%s: a node file's url must be https:// or http://", url)
		return "", false
	}
	if local != "" {
		if data, err := k.read(local); err == nil {
			if k.o.Keep != nil {
				k.o.Keep(data)
			}
			s := sha256.Sum256(data)
			return hex.EncodeToString(s[:]), true
		}
	}
	if k.o.Fetch == nil {
		k.r.Unmap(field, "%s: not downloaded to compute its sha256, and the plugin directory does not hold it at source.path", url)
		return "", false
	}
	sum, err := k.o.Fetch(url)
	if err != nil {
		k.r.Unmap(field, "downloading it once to compute its sha256: %v", err)
		return "", false
	}
	return sum, true
}

// cfnActionRE matches `{{quote X}}` in a kube-aws CloudFormation JSON template,
// a value whose JSON string kubeplug's string templates produce as "{{ X }}".
var cfnActionRE = regexp.MustCompile(`\{\{-?\s*quote\s+([^}]*?)\s*-?\}\}`)

func (k *kubeAWS) cloudformation(m map[string]any) {
	stacks := asMap(m["stacks"])
	for _, name := range sortedKeys(stacks) {
		s := asMap(stacks[name])
		prefix := "spec.cluster.cloudformation.stacks." + name
		for _, part := range []string{"resources", "outputs"} {
			pm := asMap(pop(s, part))
			if pm == nil {
				continue
			}
			field := prefix + "." + part + ".content"
			text := str(pm["content"])
			if text == "" {
				k.r.Unmap(prefix+"."+part, "no content (only content is read)")
				continue
			}
			var obj map[string]any
			if err := json.Unmarshal([]byte(cfnActionRE.ReplaceAllString(text, `"{{ $1 }}"`)), &obj); err != nil {
				k.r.Unmap(field, "not JSON kubeplug can hold as an object once {{quote X}} is a string template: %v", err)
				continue
			}
			ok := true
			obj = k.tplTree(field, obj, &ok).(map[string]any)
			if !ok {
				continue
			}
			cl := k.p.cloud()
			target := &cl.Resources
			if part == "outputs" {
				target = &cl.Outputs
			}
			if *target == nil {
				*target = map[string]any{}
			}
			for key, v := range obj {
				if _, dup := (*target)[key]; dup {
					k.r.Unmap(field+"."+key, "%s is also defined by another stack; kubeplug's cloud template has one namespace of logical names", key)
					continue
				}
				(*target)[key] = v
			}
			k.r.Map(field, "`spec.contributes.cloud."+part+"` (kubeplug's cluster template is one stack: references to kube-aws' own logical names such as IAMRoleController must be checked against docs/aws.md)")
			k.awsOnly("CloudFormation " + part)
		}
		if t := pop(s, "tags"); t != nil {
			k.r.Unmap(prefix+".tags", "%s", kubeAWSWhy["cloudformation.stacks.*.tags"])
		}
		k.leftovers(prefix, s)
	}
	delete(m, "stacks")
	k.leftovers("spec.cluster.cloudformation", m)
}

// tplTree translates the string leaves of a tree as templates.
func (k *kubeAWS) tplTree(field string, v any, ok *bool) any {
	switch t := v.(type) {
	case string:
		out, good := k.tpl(field, t)
		if !good {
			*ok = false
		}
		return out
	case map[string]any:
		for key, e := range t {
			t[key] = k.tplTree(field, e, ok)
		}
	case []any:
		for i, e := range t {
			t[i] = k.tplTree(field, e, ok)
		}
	}
	return v
}

// iam adds statements to a role's entry, once each: kube-aws' controller and etcd
// roles both become control-plane.
func (k *kubeAWS) iam(role string, stmts []map[string]any) {
	cl := k.p.cloud()
	i := slices.IndexFunc(cl.IAM, func(s v1alpha1.IAMStatements) bool { return s.Role == role })
	if i < 0 {
		cl.IAM = append(cl.IAM, v1alpha1.IAMStatements{Role: role})
		i = len(cl.IAM) - 1
	}
	for _, s := range stmts {
		if !slices.ContainsFunc(cl.IAM[i].Statements, func(e map[string]any) bool { return reflect.DeepEqual(e, s) }) {
			cl.IAM[i].Statements = append(cl.IAM[i].Statements, s)
		}
	}
}

func (k *kubeAWS) awsOnly(what string) {
	if !slices.Contains(k.aws, what) {
		k.aws = append(k.aws, what)
	}
}

// leftovers reports every field left in m, below prefix, as unmapped.
func (k *kubeAWS) leftovers(prefix string, m map[string]any) {
	for _, key := range sortedKeys(m) {
		field := prefix + "." + key
		if m[key] == nil {
			continue
		}
		if why, ok := kubeAWSWhy[field]; ok {
			k.r.Unmap(field, "%s", why)
			continue
		}
		if sub, isMap := m[key].(map[string]any); isMap && len(sub) > 0 {
			k.leftovers(field, sub)
			continue
		}
		k.r.Unmap(field, "not a kube-aws plugin field the import knows")
	}
}

func pop(m map[string]any, key string) any {
	if m == nil {
		return nil
	}
	v := m[key]
	delete(m, key)
	return v
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

func asList(v any) []any { l, _ := v.([]any); return l }

// str renders a scalar as text: YAML gives numbers for versions like 0.3.
func str(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// joinRefs lists the .Config fields read and the values they became.
func joinRefs(m map[string]string) string {
	var out []string
	for _, k := range sortedKeys(m) {
		out = append(out, "`"+k+"` -> `"+m[k]+"`")
	}
	return strings.Join(out, ", ")
}
