package model

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/diag"
)

// PoolSpec sizes a pool when a model is created.
type PoolSpec struct {
	Name  string
	Role  string
	Count int
	// MinSize and MaxSize bound an autoscaled pool; nil is Count.
	MinSize, MaxSize *int
}

// New returns an empty model with the control-plane components and the given pools
// (the control-plane pseudo pool is added when missing).
func New(pools ...PoolSpec) *Model {
	m := &Model{
		ControlPlane: ControlPlane{Components: map[string]*Component{}},
		Pools:        map[string]*Pool{},
	}
	for _, c := range Components {
		m.ControlPlane.Components[c] = &Component{}
	}
	if !slices.ContainsFunc(pools, func(p PoolSpec) bool { return p.Name == ControlPlanePool }) {
		pools = append([]PoolSpec{{Name: ControlPlanePool, Role: RoleControlPlane, Count: 1}}, pools...)
	}
	for _, p := range pools {
		m.Pools[p.Name] = &Pool{Name: p.Name, Role: p.Role, Count: p.Count, MinSize: p.MinSize, MaxSize: p.MaxSize}
	}
	return m
}

// PoolNames returns the pool names, sorted.
func (m *Model) PoolNames() []string {
	names := make([]string, 0, len(m.Pools))
	for n := range m.Pools {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Add merges the contribution of plugin by into the model. Conflicts with what other
// plugins set are fatal diagnostics naming both plugins and the key; the rest of the
// contribution is still merged so every conflict is reported at once.
func (m *Model) Add(by string, c *Contribution) diag.List {
	if c == nil {
		return nil
	}
	a := adder{by: by}
	if cp := c.ControlPlane; cp != nil {
		m.addControlPlane(&a, cp)
	}
	for _, pn := range slices.Sorted(maps.Keys(c.Pools)) {
		cur, ok := m.Pools[pn]
		if !ok {
			a.errorf("nodes."+pn, "unknown node pool %q", pn)
			continue
		}
		m.addPool(&a, cur, c.Pools[pn])
	}
	if cl := c.Cloud; cl != nil {
		m.addCloud(&a, cl)
	}
	if k := c.Kubernetes; k != nil {
		m.addKubernetes(&a, k)
	}
	for _, kp := range c.KeyPairs {
		kp.By = by
		m.KeyPairs = append(m.KeyPairs, kp)
	}
	return a.l
}

// addControlPlane merges component flags, volumes and feature gates.
func (m *Model) addControlPlane(a *adder, cp *ControlPlane) {
	for _, name := range slices.Sorted(maps.Keys(cp.Components)) {
		in := cp.Components[name]
		cur, ok := m.ControlPlane.Components[name]
		if !ok {
			a.errorf("controlPlane."+name, "unknown control-plane component %q (expected one of %s)", name, strings.Join(Components, ", "))
			continue
		}
		setAll(a, &cur.Flags, in.Flags, "controlPlane."+name+".flags")
		for _, vn := range slices.Sorted(maps.Keys(in.Volumes)) {
			v := in.Volumes[vn]
			v.By = a.by
			if cur.Volumes == nil {
				cur.Volumes = map[string]Volume{}
			}
			if prev, ok := cur.Volumes[vn]; ok && !sameVolume(prev, v) {
				a.conflict(prev.By, "controlPlane."+name+".volumes."+vn)
				continue
			}
			cur.Volumes[vn] = v
		}
	}
	setAll(a, &m.ControlPlane.FeatureGates, cp.FeatureGates, "controlPlane.featureGates")
}

// addCloud merges resources, outputs and stacks by name, and appends IAM
// statements, patches and pool parts.
func (m *Model) addCloud(a *adder, cl *Cloud) {
	setAll(a, &m.Cloud.Resources, cl.Resources, "cloud.resources")
	setAll(a, &m.Cloud.Outputs, cl.Outputs, "cloud.outputs")
	setAll(a, &m.Cloud.Stacks, cl.Stacks, "cloud.stacks")
	for _, role := range slices.Sorted(maps.Keys(cl.IAM)) {
		if m.Cloud.IAM == nil {
			m.Cloud.IAM = map[string][]Statement{}
		}
		for _, s := range cl.IAM[role] {
			m.Cloud.IAM[role] = append(m.Cloud.IAM[role], Statement{Statement: s.Statement, By: a.by})
		}
	}
	for _, p := range cl.Patches {
		m.Cloud.Patches = append(m.Cloud.Patches, Patch{Ops: p.Ops, By: a.by})
	}
	for _, p := range cl.Pools {
		p.By = a.by
		m.Cloud.Pools = append(m.Cloud.Pools, p)
	}
}

// addKubernetes merges objects and Helm releases (one of each key) and
// appends patches.
func (m *Model) addKubernetes(a *adder, k *Kubernetes) {
	m.indexObjects()
	for _, o := range k.Objects {
		key := ObjectKey(o.Object)
		if i, ok := m.objects[key]; ok {
			a.conflict(m.Kubernetes.Objects[i].By, "kubernetes.objects."+key)
			continue
		}
		m.objects[key] = len(m.Kubernetes.Objects)
		m.Kubernetes.Objects = append(m.Kubernetes.Objects, Object{Object: o.Object, By: a.by, File: o.File, Line: o.Line})
		m.serveGroup(a, m.Kubernetes.Objects[len(m.Kubernetes.Objects)-1])
	}
	for _, h := range k.HelmReleases {
		key := h.Namespace + "/" + h.Name
		if i := slices.IndexFunc(m.Kubernetes.HelmReleases, func(e HelmRelease) bool { return e.Namespace+"/"+e.Name == key }); i >= 0 {
			a.conflict(m.Kubernetes.HelmReleases[i].By, "kubernetes.helmReleases."+key)
			continue
		}
		h.By = a.by
		m.Kubernetes.HelmReleases = append(m.Kubernetes.HelmReleases, h)
	}
	for _, p := range k.Patches {
		p.By = a.by
		m.Kubernetes.Patches = append(m.Kubernetes.Patches, p)
	}
}

// indexObjects indexes the objects already in the model by key, and the API
// groups they serve, once.
func (m *Model) indexObjects() {
	if m.objects != nil {
		return
	}
	m.objects = make(map[string]int, len(m.Kubernetes.Objects))
	m.groups = map[string]servedBy{}
	for i, o := range m.Kubernetes.Objects {
		m.objects[ObjectKey(o.Object)] = i
		if g, what, ok := servedGroup(o.Object); ok {
			if _, seen := m.groups[g]; !seen {
				m.groups[g] = servedBy{what: what, by: o.By}
			}
		}
	}
}

// addPool merges a pool's files, units, kubelet settings and hooks.
func (m *Model) addPool(a *adder, cur, in *Pool) {
	base := "nodes." + cur.Name
	for _, path := range slices.Sorted(maps.Keys(in.Files)) {
		f := in.Files[path]
		f.By = a.by
		if cur.Files == nil {
			cur.Files = map[string]File{}
		}
		if prev, ok := cur.Files[path]; ok && (prev.Content != f.Content || prev.SHA256 != f.SHA256 || prev.Mode != f.Mode || prev.Owner != f.Owner) {
			a.conflict(prev.By, base+".files."+path)
			continue
		}
		cur.Files[path] = f
	}
	for _, name := range slices.Sorted(maps.Keys(in.Units)) {
		if cur.Units == nil {
			cur.Units = map[string]*Unit{}
		}
		prev, ok := cur.Units[name]
		if !ok {
			prev = &Unit{}
			cur.Units[name] = prev
		}
		addUnit(a, prev, in.Units[name], base+".units."+name)
	}
	addKubelet(a, &cur.Kubelet, in.Kubelet, base+".kubelet")
	for _, h := range in.Hooks {
		if slices.ContainsFunc(cur.Hooks, func(e Hook) bool { return e.By == a.by && e.Name == h.Name }) {
			a.errorf(base+".hooks."+h.Name, "hook %q is contributed twice", h.Name)
			continue
		}
		h.By = a.by
		cur.Hooks = append(cur.Hooks, h)
	}
}

// addUnit merges u into prev, the unit of that name so far (key names it).
func addUnit(a *adder, prev, u *Unit, key string) {
	// A masked unit and one that is written or started cannot both be.
	if (u.Mask && (prev.Content != "" || prev.Enable || len(prev.DropIns) > 0)) || (prev.Mask && (u.Content != "" || u.Enable || len(u.DropIns) > 0)) {
		a.conflict(prev.By, key)
		return
	}
	if u.Mask {
		prev.Mask, prev.By = true, a.by
		return
	}
	if u.Content != "" {
		if prev.Content != "" && (prev.Content != u.Content || prev.Enable != u.Enable) {
			a.conflict(prev.By, key)
		} else {
			prev.Content, prev.Enable, prev.By = u.Content, u.Enable, a.by
		}
	}
	setAll(a, &prev.DropIns, u.DropIns, key+".dropIns")
}

// addKubelet merges kubelet flags, labels, feature gates and taints (one
// value per key and effect).
func addKubelet(a *adder, cur *Kubelet, in Kubelet, base string) {
	setAll(a, &cur.Flags, in.Flags, base+".flags")
	setAll(a, &cur.Labels, in.Labels, base+".labels")
	setAll(a, &cur.FeatureGates, in.FeatureGates, base+".featureGates")
	for _, t := range in.Taints {
		if i := slices.IndexFunc(cur.Taints, func(e Taint) bool { return e.Key == t.Key && e.Effect == t.Effect }); i >= 0 {
			if cur.Taints[i].Value != t.Value {
				a.conflict(cur.Taints[i].By, base+".taints."+t.Key+":"+t.Effect)
			}
			continue
		}
		t.By = a.by
		cur.Taints = append(cur.Taints, t)
	}
}

type adder struct {
	by string
	l  diag.List
}

// conflictFormat is the message of a conflict: the other plugin, the plugin
// the diagnostic concerns, the key.
const conflictFormat = "plugins %s and %s set %s to different values"

func (a *adder) conflict(other, key string) {
	a.l = append(a.l, diag.Diagnostic{
		Severity: diag.Fatal, Plugin: a.by, Field: key,
		Message: fmt.Sprintf(conflictFormat, other, a.by, key),
	})
}

// ConflictWith returns the plugin that set d's key first when d is a conflict
// that [Model.Add] reported (d.Plugin is the one that set it second), so that a
// caller can point at both contributions.
func ConflictWith(d diag.Diagnostic) (other string, ok bool) {
	rest, found := strings.CutPrefix(d.Message, "plugins ")
	if !found || d.Field == "" {
		return "", false
	}
	other, _, found = strings.Cut(rest, " ")
	if !found || d.Message != fmt.Sprintf(conflictFormat, other, d.Plugin, d.Field) {
		return "", false
	}
	return other, true
}

func (a *adder) errorf(key, format string, args ...any) {
	a.l = append(a.l, diag.Diagnostic{Severity: diag.Fatal, Plugin: a.by, Field: key, Message: fmt.Sprintf(format, args...)})
}

// setAll merges settings by key: a key set by another plugin to a different value is
// a conflict; the same value is accepted and keeps its first owner.
func setAll[T any](a *adder, dst *map[string]Setting[T], src map[string]Setting[T], base string) {
	for _, k := range slices.Sorted(maps.Keys(src)) {
		v := src[k]
		if *dst == nil {
			*dst = map[string]Setting[T]{}
		}
		if prev, ok := (*dst)[k]; ok {
			if !reflect.DeepEqual(prev.Value, v.Value) {
				a.conflict(prev.By, base+"."+k)
			}
			continue
		}
		(*dst)[k] = Setting[T]{Value: v.Value, By: a.by}
	}
}

func sameVolume(a, b Volume) bool {
	return a.HostPath == b.HostPath && a.MountPath == b.MountPath && a.ReadOnly == b.ReadOnly
}

// ObjectKey identifies a Kubernetes object: group/Kind namespace/name.
func ObjectKey(o map[string]any) string {
	apiVersion, _ := o["apiVersion"].(string)
	kind, _ := o["kind"].(string)
	md, _ := o["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	group := ""
	if i := strings.IndexByte(apiVersion, '/'); i >= 0 {
		group = apiVersion[:i]
	}
	if group == "" {
		group = "core"
	}
	if ns == "" {
		return group + "/" + kind + " " + name
	}
	return group + "/" + kind + " " + ns + "/" + name
}

// servedBy is what serves an API group in the model, and which plugin added it.
type servedBy struct{ what, by string }

// servedGroup returns the API group an object makes the API server serve: a
// CustomResourceDefinition's, or an APIService's that sends it to a Service.
func servedGroup(o map[string]any) (group, what string, ok bool) {
	kind, _ := o["kind"].(string)
	apiVersion, _ := o["apiVersion"].(string)
	spec, _ := o["spec"].(map[string]any)
	md, _ := o["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	group, _ = spec["group"].(string)
	switch {
	case group == "":
		return "", "", false
	case kind == "CustomResourceDefinition" && strings.HasPrefix(apiVersion, "apiextensions.k8s.io/"):
		return group, "CustomResourceDefinition " + name, true
	case kind == "APIService" && strings.HasPrefix(apiVersion, "apiregistration.k8s.io/") && spec["service"] != nil:
		return group, "APIService " + name, true
	}
	return "", "", false
}

// serveGroup reports a group that two plugins serve, or that a plugin serves both
// as custom resources and through an APIService: the API server can route a group
// to one place only.
func (m *Model) serveGroup(a *adder, o Object) {
	g, what, ok := servedGroup(o.Object)
	if !ok {
		return
	}
	prev, seen := m.groups[g]
	if !seen {
		m.groups[g] = servedBy{what: what, by: o.By}
		return
	}
	kindOf := func(s string) string { k, _, _ := strings.Cut(s, " "); return k }
	switch {
	case kindOf(prev.what) == "CustomResourceDefinition" && kindOf(what) == "CustomResourceDefinition":
		return // custom resources of one group may come from several plugins
	case prev.by == o.By && kindOf(prev.what) == kindOf(what):
		return // one plugin's versions of one group
	}
	a.errorf("kubernetes.apis."+g, "API group %s is served by %s of plugin %s and by %s of plugin %s: the API server routes a group to one place only", g, prev.what, prev.by, what, o.By)
}
