package declarative

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/yamldoc"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/serving"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// Defaults for node constructs the manifest leaves out.
const (
	DefaultHookBehavior = v1alpha1.BehaviorSyncEnforce
	DefaultHookTimeout  = "5m"
	DefaultFileMode     = "0644"
)

// New returns the runtime of a plugin's declarative parts: at initialise it
// renders the contributes block (every string is a Go template over .Cluster,
// .Values, .Plugins and, in node contributions, .NodePool) and the manifests it
// names, and contributes the result; at the other stages it answers with nothing.
// scope limits node contributions to these pools; nil means every pool.
func New(pkg *plugin.Package, scope []string) *Runtime {
	return &Runtime{pkg: pkg, scope: scope}
}

// Runtime runs one package's declarative parts. It holds no state between calls
// and is safe for concurrent use.
type Runtime struct {
	pkg   *plugin.Package
	scope []string
}

var _ stage.Runtime = (*Runtime)(nil)

// poolData is .NodePool in templates.
type poolData struct {
	Name  string
	Role  string
	Count int
}

// Run renders the package's contributions at initialise. Problems in the
// package — a template that fails, a manifest that is no Kubernetes object — are
// fatal diagnostics located in the package's files; the error is only ctx's, when
// it ends while manifests are being rendered.
func (d *Runtime) Run(ctx context.Context, req *stage.Request) (*stage.Response, error) {
	if req.Stage != stage.Initialise || d.pkg.Manifest.Spec.Contributes == nil {
		return &stage.Response{}, nil
	}
	r := &renderer{pkg: d.pkg, req: req, limits: newLimits(ctx)}
	r.limits.explain = r.missingPlugins
	c := &model.Contribution{}
	src := d.pkg.Manifest.Spec.Contributes
	data := r.data(req.Values, nil)
	if src.ControlPlane != nil {
		var cp v1alpha1.ControlPlane
		if r.renderInto("/spec/contributes/controlPlane", src.ControlPlane, &cp, data) {
			c.ControlPlane = controlPlane(&cp)
		}
	}
	d.contributeNodes(r, src.Nodes, c)
	if src.Cloud != nil {
		var cl v1alpha1.Cloud
		if r.renderInto("/spec/contributes/cloud", src.Cloud, &cl, data) {
			c.Cloud = cloud(&cl)
		}
	}
	c.KeyPairs = r.keyPairs(d, req.Model, src.KeyPairs, data)
	if k := src.Kubernetes; k != nil {
		var err error
		if c.Kubernetes, err = d.contributeKubernetes(ctx, r, k, data); err != nil {
			return nil, err
		}
	}
	return &stage.Response{Contribution: c, Diagnostics: r.l}, nil
}

// contributeNodes renders each node contribution once per pool it applies
// to, with that pool's values and .NodePool, into c's pools.
func (d *Runtime) contributeNodes(r *renderer, nodes []v1alpha1.NodeContribution, c *model.Contribution) {
	req := r.req
	for i, n := range nodes {
		for _, pool := range d.pools(req.Model, n) {
			vals := req.Values
			if pv, ok := req.PoolValues[pool.Name]; ok {
				vals = pv
			}
			var rn v1alpha1.NodeContribution
			ptr := "/spec/contributes/nodes/" + strconv.Itoa(i)
			pdata := r.data(vals, &poolData{Name: pool.Name, Role: pool.Role, Count: pool.Count})
			if !r.renderInto(ptr, n, &rn, pdata) {
				continue
			}
			if c.Pools == nil {
				c.Pools = map[string]*model.Pool{}
			}
			if c.Pools[pool.Name] == nil {
				c.Pools[pool.Name] = &model.Pool{Name: pool.Name}
			}
			r.addNode(ptr, c.Pools[pool.Name], &rn, pdata)
		}
	}
}

// contributeKubernetes renders the Kubernetes contribution: the manifests
// (the error is only ctx's), then the Helm releases, patches, and the objects
// of served APIs and webhooks.
func (d *Runtime) contributeKubernetes(ctx context.Context, r *renderer, k *v1alpha1.Kubernetes, data map[string]any) (*model.Kubernetes, error) {
	out := &model.Kubernetes{}
	for i, m := range k.Manifests {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.manifests("/spec/contributes/kubernetes/manifests/"+strconv.Itoa(i), m, out, data)
	}
	var rk v1alpha1.Kubernetes
	if !r.renderInto("/spec/contributes/kubernetes", &v1alpha1.Kubernetes{HelmReleases: k.HelmReleases, Patches: k.Patches, APIs: k.APIs, Webhooks: k.Webhooks}, &rk, data) {
		return out, nil
	}
	out.HelmReleases = append(out.HelmReleases, d.helmReleases(r, rk.HelmReleases)...)
	for _, p := range rk.Patches {
		out.Patches = append(out.Patches, model.ObjectPatch{Target: model.ObjectRef(p.Target), Ops: ops(p.Patch)})
	}
	for _, v := range serving.Validate(rk.APIs, rk.Webhooks) {
		r.errorf("/spec/contributes/kubernetes"+v[0], "%s", v[1])
	}
	for _, o := range serving.Objects(d.pkg.Name, rk.APIs, rk.Webhooks) {
		out.Objects = append(out.Objects, model.Object{Object: o})
	}
	return out, nil
}

// helmReleases are the rendered Helm releases as the model's: named after
// the plugin unless they say, a chart in the package as a clean path, their
// values rendered (a release whose values fail is left out, diagnosed).
func (d *Runtime) helmReleases(r *renderer, hs []v1alpha1.HelmRelease) []model.HelmRelease {
	var out []model.HelmRelease
	for i, h := range hs {
		name := h.Name
		if name == "" {
			name = d.pkg.Name
		}
		vals, ok := r.releaseValues("/spec/contributes/kubernetes/helmReleases/"+strconv.Itoa(i), h, r.req.Values)
		if !ok {
			continue
		}
		chart := h.Chart
		if !model.IsChartRef(h.Chart, h.Repo) {
			chart = path.Clean(chart) // a path in the package
		}
		out = append(out, model.HelmRelease{Name: name, Namespace: h.Namespace, Chart: chart, Repo: h.Repo, Version: h.Version, Test: h.Test, Values: vals})
	}
	return out
}

// pools returns the model's pools a node contribution applies to: within the
// plugin's scope, the contribution's pools and its roles.
func (d *Runtime) pools(m *model.Model, n v1alpha1.NodeContribution) []*model.Pool {
	var out []*model.Pool
	for _, name := range m.PoolNames() {
		p := m.Pools[name]
		if d.scope != nil && !slices.Contains(d.scope, name) {
			continue
		}
		if len(n.Pools) > 0 && !slices.Contains(n.Pools, name) {
			continue
		}
		if len(n.Roles) > 0 && !slices.Contains(n.Roles, p.Role) {
			continue
		}
		out = append(out, p)
	}
	return out
}

type renderer struct {
	pkg    *plugin.Package
	req    *stage.Request
	limits *limits
	l      diag.List
	// objects says where each manifest object the plugin rendered so far was
	// written, by objectID: two objects of one identity are an error.
	objects map[string]string
}

// objectID identifies an object in a cluster: its API group (not version:
// apps/v1beta2 and apps/v1 name one Deployment), kind, namespace and name.
func objectID(o map[string]any) string {
	av, _ := o["apiVersion"].(string)
	group, _, found := strings.Cut(av, "/")
	if !found {
		group = ""
	}
	kind, _ := o["kind"].(string)
	md, _ := o["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	id := kind
	if group != "" {
		id += "." + group
	}
	if ns != "" {
		return id + " " + ns + "/" + name
	}
	return id + " " + name
}

// seen records that the object o was written at where, and returns where an
// object of the same identity was written before, if one was.
func (r *renderer) seen(o map[string]any, where string) (string, bool) {
	if r.objects == nil {
		r.objects = map[string]string{}
	}
	id := objectID(o)
	if prev, ok := r.objects[id]; ok {
		return prev, true
	}
	r.objects[id] = where
	return "", false
}

func (r *renderer) data(values map[string]any, pool *poolData) map[string]any {
	facts := r.req.Facts
	if facts == nil {
		facts = &stage.Facts{}
	}
	return map[string]any{"Cluster": r.req.Cluster, "Values": values, "Plugins": r.req.Plugins, "NodePool": pool, "Facts": facts, "KeyPairs": keyPairPaths(r.pkg)}
}

// KeyPairPaths is .KeyPairs.NAME in templates: where a key pair of the
// plugin's is on its machines. Templates get paths, never the bytes.
type KeyPairPaths struct {
	CertFile, KeyFile, CAFile string
}

// keyPairPaths are the paths of every key pair pkg declares, by name.
func keyPairPaths(pkg *plugin.Package) map[string]*KeyPairPaths {
	c := pkg.Manifest.Spec.Contributes
	if c == nil || len(c.KeyPairs) == 0 {
		return nil
	}
	out := make(map[string]*KeyPairPaths, len(c.KeyPairs))
	for _, k := range c.KeyPairs {
		kp := model.KeyPair{Name: k.Name, By: pkg.Name}
		out[k.Name] = &KeyPairPaths{CertFile: kp.CertFile(), KeyFile: kp.KeyFile(), CAFile: kp.CAFile()}
	}
	return out
}

// keyPairs renders the plugin's key pair declarations and the pools whose
// machines get each (within the plugin's scope).
func (r *renderer) keyPairs(d *Runtime, m *model.Model, src []v1alpha1.KeyPair, data map[string]any) []model.KeyPair {
	var out []model.KeyPair
	for i, k := range src {
		ptr := "/spec/contributes/keyPairs/" + strconv.Itoa(i)
		var rk v1alpha1.KeyPair
		if !r.renderInto(ptr, k, &rk, data) {
			continue
		}
		for j, ip := range rk.IPAddresses {
			if net.ParseIP(ip) == nil {
				r.errorf(ptr+"/ipAddresses/"+strconv.Itoa(j), "key pair %s: expected an IP address, found %q", rk.Name, ip)
			}
		}
		if rk.Validity != "" {
			if v, err := time.ParseDuration(rk.Validity); err != nil || v < time.Hour {
				r.errorf(ptr+"/validity", "key pair %s: expected a duration of an hour or more such as 8760h, found %q", rk.Name, rk.Validity)
			}
		}
		ca := rk.CA
		if ca == "" {
			ca = "cluster"
		}
		kp := model.KeyPair{Name: rk.Name, CA: ca, CommonName: rk.CommonName, Organizations: rk.Organizations,
			DNSNames: rk.DNSNames, IPAddresses: rk.IPAddresses, Usages: rk.Usages, Validity: rk.Validity, Pools: []string{}}
		for _, p := range d.pools(m, v1alpha1.NodeContribution{Pools: rk.Pools, Roles: rk.Roles}) {
			kp.Pools = append(kp.Pools, p.Name)
		}
		out = append(out, kp)
	}
	return out
}

// pluginRefRE finds the plugins a template reads through .Plugins:
// .Plugins.NAME and index .Plugins "NAME" ($.Plugins too).
var pluginRefRE = regexp.MustCompile(`\.Plugins\.([A-Za-z_][A-Za-z0-9_]*)|index\s+\$?\.Plugins\s+"([^"]+)"`)

// missingPlugins says which plugins text reads through .Plugins that the
// cluster does not have and the plugin does not require: the reason a
// template fails with "nil pointer evaluating interface {}.pkiDir". Empty when
// there are none.
func (r *renderer) missingPlugins(text string) string {
	var missing []string
	for _, m := range pluginRefRE.FindAllStringSubmatch(text, -1) {
		name := m[1] + m[2]
		if _, ok := r.req.Plugins[name]; ok || name == r.pkg.Name || slices.Contains(missing, name) {
			continue
		}
		missing = append(missing, name)
	}
	if len(missing) == 0 {
		return ""
	}
	var reqs []string
	for _, n := range missing {
		if !slices.ContainsFunc(r.pkg.Manifest.Spec.Requires, func(d v1alpha1.Dependency) bool { return d.Name == n }) {
			reqs = append(reqs, "{name: "+n+"}")
		}
	}
	msg := fmt.Sprintf("plugin %s reads .Plugins.%s, but %s is not in the cluster", r.pkg.Name, strings.Join(missing, " and .Plugins."), strings.Join(missing, " and "))
	if len(reqs) > 0 {
		msg += fmt.Sprintf(": %s does not require it; add `requires: [%s]` to its plugin.yaml", r.pkg.Name, strings.Join(reqs, ", "))
	}
	return msg
}

func (r *renderer) errorf(ptr, format string, args ...any) {
	file, line, col, field := r.pkg.ManifestPos(ptr)
	r.l = append(r.l, diag.Diagnostic{Severity: diag.Fatal, Plugin: r.pkg.Name, File: file, Line: line, Column: col, Field: field, Message: fmt.Sprintf(format, args...)})
}

// renderInto renders every string in src as a template and decodes the result into
// out. ptr is src's place in plugin.yaml, for diagnostics.
func (r *renderer) renderInto(ptr string, src, out any, data map[string]any) bool {
	raw, err := json.Marshal(src)
	if err != nil {
		r.errorf(ptr, "cannot prepare the contribution for rendering: %v", err)
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		r.errorf(ptr, "cannot prepare the contribution for rendering: %v", err)
		return false
	}
	ok := true
	tree = r.walk(ptr, tree, data, &ok)
	if !ok {
		return false
	}
	raw, err = json.Marshal(tree)
	if err == nil {
		dec = json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		err = dec.Decode(out)
	}
	if err != nil {
		r.errorf(ptr, "rendered contribution does not fit the format: %v", err)
		return false
	}
	return true
}

func (r *renderer) walk(ptr string, v any, data map[string]any, ok *bool) any {
	switch t := v.(type) {
	case string:
		s, err := r.limits.execute(t, data)
		if err != nil {
			r.errorf(ptr, "template: %v", err)
			*ok = false
			return t
		}
		return s
	case map[string]any:
		// Keys are templates too (an IAM condition key naming the cluster): each
		// is rendered, and two keys that render alike are an error, since one
		// would silently replace the other.
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		from := map[string]string{}
		for _, k := range keys {
			kp := ptr + "/" + escapePtr(k)
			e := r.walk(kp, t[k], data, ok)
			rk := k
			if strings.Contains(k, "{{") {
				s, err := r.limits.execute(k, data)
				if err != nil {
					r.errorf(kp, "template in key: %v", err)
					*ok = false
					continue
				}
				rk = s
				delete(t, k)
			}
			if prev, dup := from[rk]; dup {
				r.errorf(kp, "key %q renders as %q, as key %q does", k, rk, prev)
				*ok = false
				continue
			}
			from[rk] = k
			t[rk] = e
		}
	case []any:
		for i, e := range t {
			t[i] = r.walk(ptr+"/"+strconv.Itoa(i), e, data, ok)
		}
	}
	return v
}

func escapePtr(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// settings turns rendered flags into settings, leaving out flags that rendered
// empty: an optional value left unset removes its flag.
func settings(m map[string]string) map[string]model.Setting[string] {
	if len(m) == 0 {
		return nil
	}
	out := map[string]model.Setting[string]{}
	for k, v := range m {
		if v != "" {
			out[k] = model.Setting[string]{Value: v}
		}
	}
	return out
}

func boolSettings(m map[string]bool) map[string]model.Setting[bool] {
	if len(m) == 0 {
		return nil
	}
	out := map[string]model.Setting[bool]{}
	for k, v := range m {
		out[k] = model.Setting[bool]{Value: v}
	}
	return out
}

func controlPlane(cp *v1alpha1.ControlPlane) *model.ControlPlane {
	out := &model.ControlPlane{Components: map[string]*model.Component{}, FeatureGates: boolSettings(cp.FeatureGates)}
	for name, c := range map[string]*v1alpha1.Component{
		model.Etcd: cp.Etcd, model.KubeAPIServer: cp.APIServer, model.KubeControllerManager: cp.ControllerManager, model.KubeScheduler: cp.Scheduler,
	} {
		if c == nil {
			continue
		}
		mc := &model.Component{Flags: settings(c.Flags)}
		for _, v := range c.Volumes {
			if mc.Volumes == nil {
				mc.Volumes = map[string]model.Volume{}
			}
			mc.Volumes[v.Name] = model.Volume{HostPath: v.HostPath, MountPath: v.MountPath, ReadOnly: v.ReadOnly}
		}
		out.Components[name] = mc
	}
	return out
}

// addNode adds a rendered node contribution to p; data is what the pool's
// templates see, for source files that are templates.
func (r *renderer) addNode(ptr string, p *model.Pool, n *v1alpha1.NodeContribution, data map[string]any) {
	r.addFiles(ptr, p, n.Files, data)
	addUnits(p, n.SystemdUnits)
	if k := n.Kubelet; k != nil {
		p.Kubelet.Flags = settings(k.Flags)
		p.Kubelet.Labels = settings(k.Labels)
		p.Kubelet.FeatureGates = boolSettings(k.FeatureGates)
		for _, t := range k.Taints {
			p.Kubelet.Taints = append(p.Kubelet.Taints, model.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	r.addHooks(ptr, p, n.Hooks)
}

// addFiles adds a node contribution's files (at ptr) to p: their content, or
// their source file's, rendered with data when it is a template; the mode
// defaults to DefaultFileMode.
func (r *renderer) addFiles(ptr string, p *model.Pool, files []v1alpha1.NodeFile, data map[string]any) {
	for i, f := range files {
		content := f.Content
		if f.Source != "" {
			b, err := r.read(f.Source)
			if err != nil {
				r.errorf(ptr+"/files/"+strconv.Itoa(i)+"/source", "%v", err)
				continue
			}
			content = string(b)
			if f.Template != nil && *f.Template {
				text, ok := r.executeFile(f.Source, content, data)
				if !ok {
					continue
				}
				content = text
			}
		}
		mode := f.Mode
		if mode == "" {
			mode = DefaultFileMode
		}
		if len(mode) == 3 {
			mode = "0" + mode
		}
		if p.Files == nil {
			p.Files = map[string]model.File{}
		}
		p.Files[path.Clean(f.Path)] = model.File{Content: content, URL: f.URL, SHA256: f.SHA256, Mode: mode, Owner: f.Owner}
	}
}

// addUnits adds a node contribution's systemd units, with their drop-ins, to p.
func addUnits(p *model.Pool, units []v1alpha1.SystemdUnit) {
	for _, u := range units {
		if p.Units == nil {
			p.Units = map[string]*model.Unit{}
		}
		mu := &model.Unit{Content: u.Content, Enable: u.Enable, Mask: u.Mask}
		for _, di := range u.DropIns {
			if mu.DropIns == nil {
				mu.DropIns = map[string]model.Setting[string]{}
			}
			mu.DropIns[di.Name] = model.Setting[string]{Value: di.Content}
		}
		p.Units[u.Name] = mu
	}
}

// addHooks adds a node contribution's hooks (at ptr) to p, with the default
// behavior and timeout, and their script files read.
func (r *renderer) addHooks(ptr string, p *model.Pool, hooks []v1alpha1.NodeHook) {
	for i, h := range hooks {
		mh := model.Hook{Name: h.Name, At: h.At, Command: h.Run.Command, Behavior: h.Behavior, Timeout: h.Timeout, When: h.When,
			URL: h.Run.URL, SHA256: h.Run.SHA256, Before: h.Before, Requires: h.Requires, Once: h.Once}
		if mh.Behavior == "" {
			mh.Behavior = DefaultHookBehavior
		}
		if mh.Timeout == "" {
			mh.Timeout = DefaultHookTimeout
		}
		if h.Run.Script != "" {
			b, err := r.read(h.Run.Script)
			if err != nil {
				r.errorf(ptr+"/hooks/"+strconv.Itoa(i)+"/run/script", "%v", err)
				continue
			}
			mh.Script = string(b)
		}
		p.Hooks = append(p.Hooks, mh)
	}
}

// executeFile renders text, the package file ref, as a template; a failure is
// a fatal diagnostic at its line in that file.
func (r *renderer) executeFile(ref, text string, data map[string]any) (string, bool) {
	out, err := r.limits.execute(text, data)
	if err != nil {
		clean, _ := plugin.CleanRef(ref)
		d := diag.Diagnostic{Severity: diag.Fatal, Plugin: r.pkg.Name, File: path.Join(r.pkg.Location, clean), Message: "template: " + err.Error()}
		if te, ok := errors.AsType[*templateError](err); ok {
			d.Line, d.Column = te.Line, te.Column
		}
		r.l = append(r.l, d)
		return "", false
	}
	return out, true
}

func (r *renderer) read(ref string) ([]byte, error) {
	clean, err := plugin.CleanRef(ref)
	if err != nil {
		return nil, err
	}
	b, err := fs.ReadFile(r.pkg.FS, clean)
	if err != nil {
		return nil, fmt.Errorf("read %s from the package: %w", ref, err)
	}
	return b, nil
}

func cloud(c *v1alpha1.Cloud) *model.Cloud {
	out := &model.Cloud{}
	for k, v := range c.Resources {
		if out.Resources == nil {
			out.Resources = map[string]model.Setting[any]{}
		}
		out.Resources[k] = model.Setting[any]{Value: v}
	}
	for k, v := range c.Outputs {
		if out.Outputs == nil {
			out.Outputs = map[string]model.Setting[any]{}
		}
		out.Outputs[k] = model.Setting[any]{Value: v}
	}
	for _, iam := range c.IAM {
		if out.IAM == nil {
			out.IAM = map[string][]model.Statement{}
		}
		for _, s := range iam.Statements {
			out.IAM[iam.Role] = append(out.IAM[iam.Role], model.Statement{Statement: s})
		}
	}
	if len(c.Patches) > 0 {
		out.Patches = []model.Patch{{Ops: ops(c.Patches)}}
	}
	for _, p := range c.Pools {
		part := model.PoolPart{Pool: p.Pool, Role: p.Role, Tags: p.Tags, LaunchTemplate: p.LaunchTemplate, Patches: ops(p.Patches)}
		part.IAM = anyMap(p.IAM)
		part.SecurityGroupIngress = anyMap(p.SecurityGroupIngress)
		out.Pools = append(out.Pools, part)
	}
	for _, st := range c.Stacks {
		if out.Stacks == nil {
			out.Stacks = map[string]model.Setting[model.Stack]{}
		}
		out.Stacks[st.Name] = model.Setting[model.Stack]{Value: model.Stack{Template: st.Template, Parameters: st.Parameters, Inputs: st.Inputs, DependsOn: st.DependsOn}}
	}
	return out
}

// anyMap is a map of named objects as plain values.
func anyMap(in map[string]map[string]any) map[string]any {
	if in == nil {
		return nil
	}
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

func ops(in []v1alpha1.PatchOp) []model.PatchOp {
	out := make([]model.PatchOp, len(in))
	for i, o := range in {
		out[i] = model.PatchOp{Op: o.Op, Path: o.Path, From: o.From, Value: o.Value}
	}
	return out
}

// manifests renders the manifest files at ref (a file or a directory, walked in
// lexical order) and adds their objects.
func (r *renderer) manifests(ptr, ref string, k *model.Kubernetes, data map[string]any) {
	clean, err := plugin.CleanRef(ref)
	if err != nil {
		r.errorf(ptr, "%v", err)
		return
	}
	files, err := manifestFiles(r.pkg.FS, clean)
	if err != nil {
		r.errorf(ptr, "read manifests %s: %v", ref, err)
		return
	}
	for _, f := range files {
		name := path.Join(r.pkg.Location, f)
		b, err := fs.ReadFile(r.pkg.FS, f)
		if err != nil {
			r.errorf(ptr, "read %s: %v", f, err)
			continue
		}
		text, err := r.limits.execute(string(b), data)
		if err != nil {
			d := diag.Diagnostic{Severity: diag.Fatal, Plugin: r.pkg.Name, File: name, Message: "template: " + err.Error()}
			if te, ok := errors.AsType[*templateError](err); ok {
				d.Line, d.Column = te.Line, te.Column
			}
			r.l = append(r.l, d)
			continue
		}
		key := parseKey(name, text)
		if objs, ok := manifestCache.get(key); ok {
			for _, obj := range objs {
				if prev, dup := r.seen(obj, name); dup {
					r.l.Errorf(name, 0, 0, "", "%s is defined twice by plugin %s: here and in %s; the second would replace the first at apply", objectID(obj), r.pkg.Name, prev)
					continue
				}
				k.Objects = append(k.Objects, model.Object{Object: obj, File: name})
			}
			continue
		}
		sameLines := strings.Count(text, "\n") == strings.Count(string(b), "\n")
		if objs, clean := r.parseManifest(name, text, sameLines, k); clean {
			manifestCache.put(key, len(text), objs)
		}
	}
}

// parseManifest parses the rendered manifest text of the file name and adds
// its objects to k, at their lines when sameLines (rendering kept the lines
// where they were). It returns the objects, and whether the text had no
// problem (then they may be cached).
func (r *renderer) parseManifest(name, text string, sameLines bool, k *model.Kubernetes) (objs []map[string]any, clean bool) {
	docs, dl := yamldoc.ParseAll(name+" (rendered)", []byte(text))
	for i := range dl {
		dl[i].Plugin = r.pkg.Name
	}
	r.l = append(r.l, dl...)
	clean = len(dl) == 0
	for _, d := range docs {
		obj, ok := d.Value.(map[string]any)
		if !ok {
			d.Errorf(&r.l, "", "expected a Kubernetes object (a mapping), found %T", d.Value)
			clean = false
			continue
		}
		if missing := missingObjectFields(obj); missing != "" {
			d.Errorf(&r.l, "", "expected a Kubernetes object with %s", missing)
			clean = false
			continue
		}
		objs = append(objs, obj)
		line, col := d.Pos("")
		where := fmt.Sprintf("%s:%d:%d", d.File, line, col)
		if prev, dup := r.seen(obj, where); dup {
			d.Errorf(&r.l, "", "%s is defined twice by plugin %s: here and at %s; the second would replace the first at apply", objectID(obj), r.pkg.Name, prev)
			continue
		}
		// The object's line in the file as written: the rendered one when
		// rendering kept the lines where they were.
		at := 0
		if sameLines {
			at = line
		}
		k.Objects = append(k.Objects, model.Object{Object: obj, File: name, Line: at})
	}
	return objs, clean
}

// manifestFiles lists the manifest files at clean (a file or a directory,
// walked in lexical order).
func manifestFiles(fsys fs.FS, clean string) ([]string, error) {
	var files []string
	err := fs.WalkDir(fsys, clean, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch path.Ext(p) {
		case ".yaml", ".yml", ".json":
			if !de.IsDir() {
				files = append(files, p)
			}
		}
		return nil
	})
	return files, err
}

// RenderedManifest is one manifest file of a package, rendered.
type RenderedManifest struct {
	// File is the file's path inside the package.
	File string
	// Template and Text are the file as written and as rendered.
	Template, Text string
}

// RenderManifests renders the manifest files that pkg's
// spec.contributes.kubernetes.manifests name, for req, as Run does at
// initialise, and returns them in order. Files that cannot be read or
// rendered are left out: Run reports them. It is for tools that check the
// rendered objects against the files they came from (plugin lint).
func RenderManifests(ctx context.Context, pkg *plugin.Package, req *stage.Request) []RenderedManifest {
	c := pkg.Manifest.Spec.Contributes
	if c == nil || c.Kubernetes == nil {
		return nil
	}
	r := &renderer{pkg: pkg, req: req, limits: newLimits(ctx)}
	data := r.data(req.Values, nil)
	var out []RenderedManifest
	for _, ref := range c.Kubernetes.Manifests {
		clean, err := plugin.CleanRef(ref)
		if err != nil {
			continue
		}
		files, _ := manifestFiles(pkg.FS, clean)
		for _, f := range files {
			if ctx.Err() != nil {
				return out
			}
			b, err := fs.ReadFile(pkg.FS, f)
			if err != nil {
				continue
			}
			text, err := r.limits.execute(string(b), data)
			if err != nil {
				continue
			}
			out = append(out, RenderedManifest{File: f, Template: string(b), Text: text})
		}
	}
	return out
}

func missingObjectFields(o map[string]any) string {
	var missing []string
	if s, _ := o["apiVersion"].(string); s == "" {
		missing = append(missing, "apiVersion")
	}
	if s, _ := o["kind"].(string); s == "" {
		missing = append(missing, "kind")
	}
	md, _ := o["metadata"].(map[string]any)
	if s, _ := md["name"].(string); s == "" {
		missing = append(missing, "metadata.name")
	}
	return strings.Join(missing, ", ")
}
