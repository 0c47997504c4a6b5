package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/model"
)

// kubeObject is one Kubernetes object on its way into a plugin's file, as JSON so that
// patches apply to exactly what is written.
type kubeObject struct {
	plugin string
	// doc is the object's JSON; a manifest object that plainCopy could copy
	// is kept as that copy in obj instead, and gets its doc (json.Marshal of
	// obj, the same bytes as of the model's object) only when something needs
	// it: a patch, a file, a CRD's scope.
	doc []byte
	obj map[string]any
	// target is what patch targets match, read from doc once and after every patch.
	target model.ObjectRef
	// source is a comment saying where a Helm-rendered object came from.
	source string
	// releaseNamespace is the namespace of the Helm release an object came from.
	releaseNamespace string
	// release is the index in Model.Kubernetes.HelmReleases of the release the object
	// came from, -1 for a manifest.
	release int
	// patched says an object patch changed the object.
	patched bool
	// file and line say where a manifest object is written (model.Object's).
	file string
	line int
}

func newKubeObject(plugin string, doc []byte, source string) *kubeObject {
	o := &kubeObject{plugin: plugin, doc: doc, source: source, release: -1}
	o.target = o.ref()
	return o
}

// newManifestObject is the kubeObject of a manifest object of the model: a
// plain copy of it when plainCopy can make one, else its JSON.
func newManifestObject(plugin string, obj map[string]any) (*kubeObject, error) {
	if c, ok := plainCopy(obj); ok {
		if o, ok := c.(map[string]any); ok {
			if ref, ok := plainRef(o); ok {
				return &kubeObject{plugin: plugin, obj: o, target: ref, release: -1}, nil
			}
		}
	}
	doc, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return newKubeObject(plugin, doc, ""), nil
}

// json is the object's JSON, made from obj the first time.
func (o *kubeObject) json() ([]byte, error) {
	if o.doc == nil {
		doc, err := json.Marshal(o.obj)
		if err != nil {
			return nil, err
		}
		o.doc, o.obj = doc, nil
	}
	return o.doc, nil
}

// ref reads the fields a patch target matches on.
func (o *kubeObject) ref() model.ObjectRef {
	var h struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(o.doc, &h) // every doc was produced by json.Marshal or YAMLToJSON
	return model.ObjectRef{APIVersion: h.APIVersion, Kind: h.Kind, Namespace: h.Metadata.Namespace, Name: h.Metadata.Name}
}

func matches(t, o model.ObjectRef) bool {
	return t.Kind == o.Kind &&
		(t.APIVersion == "" || t.APIVersion == o.APIVersion) &&
		(t.Namespace == "" || t.Namespace == o.Namespace) &&
		(t.Name == "" || t.Name == o.Name)
}

// refText describes an object or a patch target for a diagnostic.
func refText(t model.ObjectRef) string {
	s := t.Kind
	if t.APIVersion != "" {
		s = t.APIVersion + " " + s
	}
	switch {
	case t.Namespace != "" && t.Name != "":
		s += " " + t.Namespace + "/" + t.Name
	case t.Name != "":
		s += " " + t.Name
	case t.Namespace != "":
		s += " in namespace " + t.Namespace
	}
	return s
}

// objects computes each plugin's objects in deploy order: its manifests in model
// order, then its Helm releases' objects in Helm's install order, with every object
// patch applied in plugin order.
func (r *renderer) objects(ctx context.Context) ([]string, map[string][]*kubeObject) {
	k := r.in.Model.Kubernetes
	byPlugin := map[string][]*kubeObject{}
	var all []*kubeObject
	for i, o := range k.Objects {
		ko, err := newManifestObject(o.By, o.Object)
		if err != nil {
			r.fatalf(o.By, fmt.Sprintf("kubernetes.objects[%d]", i), "encoding %s: %v", model.ObjectKey(o.Object), err)
			continue
		}
		ko.file, ko.line = o.File, o.Line
		byPlugin[o.By] = append(byPlugin[o.By], ko)
	}
	for i, h := range k.HelmReleases {
		if ctx.Err() != nil {
			return nil, nil
		}
		objs, err := r.helmRelease(ctx, h)
		if err != nil {
			r.fatalf(h.By, "kubernetes.helmReleases."+h.Namespace+"/"+h.Name,
				"rendering chart %s of plugin %s as release %s/%s: %v", h.Chart, h.By, h.Namespace, h.Name, err)
			continue
		}
		for _, o := range objs {
			o.release = i
		}
		byPlugin[h.By] = append(byPlugin[h.By], objs...)
	}
	order := r.kubeOrder(byPlugin)
	for _, p := range order {
		all = append(all, byPlugin[p]...)
	}
	r.releaseNamespaces(all)
	for _, p := range order {
		r.duplicates(p, byPlugin[p])
	}
	defer r.servedAPIs(order, byPlugin) // on the objects as patched

	for i, p := range k.Patches {
		field := fmt.Sprintf("kubernetes.patches[%d]", i)
		target := refText(p.Target)
		if p.Target.Kind == "" {
			r.fatalf(p.By, field+".target.kind", "a patch target needs a kind")
			continue
		}
		n := 0
		for _, o := range all {
			if !matches(p.Target, o.target) {
				continue
			}
			n++
			doc, err := o.json()
			if err == nil {
				doc, err = applyOps(doc, p.Ops)
			}
			if err != nil {
				r.patchFailed(p.By, field, refText(o.target), err)
				continue
			}
			o.doc = doc
			o.target = o.ref()
			o.patched = true
		}
		if n == 0 {
			r.fatalf(p.By, field+".target", "patch target %s matches no object", target)
		}
	}

	return order, byPlugin
}

// releaseNamespaces puts Helm-rendered objects that name no namespace into their
// release's namespace, as `helm install --namespace` does, unless their kind is
// cluster-scoped: a built-in one, or a custom resource whose CRD in this render says so.
// Without it such objects would land in whatever namespace the applier defaults to.
func (r *renderer) releaseNamespaces(all []*kubeObject) {
	clusterKinds := map[string]bool{}
	for gk := range clusterScoped {
		clusterKinds[gk] = true
	}
	for _, o := range all {
		if o.target.Kind != "CustomResourceDefinition" {
			continue
		}
		var crd struct {
			Spec struct {
				Group string `json:"group"`
				Scope string `json:"scope"`
				Names struct {
					Kind string `json:"kind"`
				} `json:"names"`
			} `json:"spec"`
		}
		doc, err := o.json()
		if err == nil && json.Unmarshal(doc, &crd) == nil && crd.Spec.Scope == "Cluster" {
			clusterKinds[crd.Spec.Group+"/"+crd.Spec.Names.Kind] = true
		}
	}
	for _, o := range all {
		// Only Helm-rendered objects have a release namespace: their doc is set.
		if o.releaseNamespace == "" || o.target.Namespace != "" || clusterKinds[groupKind(o.target)] {
			continue
		}
		v, err := decodeJSON(o.doc)
		obj, ok := v.(map[string]any)
		if err != nil || !ok {
			continue // helmObject only lets objects through
		}
		md, _ := obj["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			obj["metadata"] = md
		}
		md["namespace"] = o.releaseNamespace
		doc, err := json.Marshal(obj)
		if err != nil {
			r.fatalf(o.plugin, "kubernetes", "encoding %s: %v", refText(o.target), err)
			continue
		}
		o.doc = doc
		o.target = o.ref()
	}
}

// duplicates reports two objects of one plugin with the same group, kind,
// namespace and name (a Helm chart rendering an object the plugin's manifests
// also hold, or plugin code contributing one twice), naming where each came
// from: at apply the second would silently replace the first. (The declarative
// runtime reports two such manifest objects at their files and lines.)
func (r *renderer) duplicates(plugin string, objs []*kubeObject) {
	seen := map[string]*kubeObject{}
	for _, o := range objs {
		t := o.target
		id := groupKind(t) + " " + t.Namespace + "/" + t.Name
		prev, ok := seen[id]
		if !ok {
			seen[id] = o
			continue
		}
		r.fatalf(plugin, "kubernetes", "plugin %s has %s twice: from %s and from %s; the second would replace the first at apply",
			plugin, refText(t), r.origin(prev), r.origin(o))
	}
}

// servedAPIs reports objects of an API the target Kubernetes version does not
// serve (fatal) or has deprecated (a warning), as Input.ServedAPI says, at the
// manifest line that wrote them or naming the chart template.
func (r *renderer) servedAPIs(order []string, byPlugin map[string][]*kubeObject) {
	if r.in.ServedAPI == nil {
		return
	}
	for _, p := range order {
		for _, o := range byPlugin[p] {
			msg, fatal := r.in.ServedAPI(o.target.APIVersion, o.target.Kind)
			if msg == "" {
				continue
			}
			d := diag.Diagnostic{Severity: diag.Warning, Plugin: p, File: o.file, Line: o.line, Field: "kubernetes",
				Message: fmt.Sprintf("%s is %s", refText(o.target), msg)}
			if o.line > 0 {
				d.Column = 1
			}
			if o.source != "" {
				d.Message += " (" + o.source + ")"
			}
			if fatal {
				d.Severity = diag.Fatal
			}
			if d.File != "" {
				d.Field = ""
			}
			r.diags = append(r.diags, d)
		}
	}
}

// origin says where an object came from, for a diagnostic.
func (r *renderer) origin(o *kubeObject) string {
	if o.release < 0 {
		return "its manifests"
	}
	if o.source != "" {
		return o.source // "helm release NS/NAME, TEMPLATE"
	}
	h := r.in.Model.Kubernetes.HelmReleases[o.release]
	return "helm release " + h.Namespace + "/" + h.Name
}

func groupKind(t model.ObjectRef) string {
	group, _, found := strings.Cut(t.APIVersion, "/")
	if !found {
		group = ""
	}
	return group + "/" + t.Kind
}

// clusterScoped are the built-in cluster-scoped kinds by group/kind ("" is core).
var clusterScoped = map[string]bool{
	"/Namespace": true, "/Node": true, "/PersistentVolume": true, "/ComponentStatus": true,
	"rbac.authorization.k8s.io/ClusterRole": true, "rbac.authorization.k8s.io/ClusterRoleBinding": true,
	"apiextensions.k8s.io/CustomResourceDefinition":                 true,
	"apiregistration.k8s.io/APIService":                             true,
	"admissionregistration.k8s.io/MutatingWebhookConfiguration":     true,
	"admissionregistration.k8s.io/ValidatingWebhookConfiguration":   true,
	"admissionregistration.k8s.io/ValidatingAdmissionPolicy":        true,
	"admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding": true,
	"admissionregistration.k8s.io/MutatingAdmissionPolicy":          true,
	"admissionregistration.k8s.io/MutatingAdmissionPolicyBinding":   true,
	"storage.k8s.io/StorageClass":                                   true, "storage.k8s.io/CSIDriver": true, "storage.k8s.io/CSINode": true,
	"storage.k8s.io/VolumeAttachment": true, "storage.k8s.io/VolumeAttributesClass": true,
	"scheduling.k8s.io/PriorityClass": true,
	"networking.k8s.io/IngressClass":  true, "networking.k8s.io/IPAddress": true, "networking.k8s.io/ServiceCIDR": true,
	"node.k8s.io/RuntimeClass":                                true,
	"flowcontrol.apiserver.k8s.io/FlowSchema":                 true,
	"flowcontrol.apiserver.k8s.io/PriorityLevelConfiguration": true,
	"certificates.k8s.io/CertificateSigningRequest":           true,
	"certificates.k8s.io/ClusterTrustBundle":                  true,
	"resource.k8s.io/DeviceClass":                             true,
}

// kubernetes renders kubernetes/<NN>-<plugin>.yaml from objects.
func (r *renderer) kubernetes(ctx context.Context) {
	order, byPlugin := r.objects(ctx)
	if ctx.Err() != nil {
		return
	}
	width := max(2, len(fmt.Sprint(len(order)-1)))
	for i, p := range order {
		if !nameRE.MatchString(p) {
			r.fatalf(p, "kubernetes", "plugin name %q cannot name a file", p)
			continue
		}
		var b bytes.Buffer
		for j, o := range byPlugin[p] {
			doc, err := o.json()
			var y []byte
			if err == nil {
				y, err = yaml.JSONToYAML(doc)
			}
			if err != nil {
				r.fatalf(p, "kubernetes", "encoding %s: %v", refText(o.target), err)
				continue
			}
			if j > 0 {
				b.WriteString("---\n")
			}
			if o.source != "" {
				b.WriteString("# Source: " + o.source + "\n")
			}
			b.Write(y)
		}
		r.out[fmt.Sprintf("kubernetes/%0*d-%s.yaml", width, i, p)] = b.Bytes()
	}
}

// kubeOrder is the deploy order of the plugins that have Kubernetes content: the
// resolved order when the input has one, else the order the model's lists imply.
func (r *renderer) kubeOrder(byPlugin map[string][]*kubeObject) []string {
	var out []string
	for _, p := range append(slices.Clone(r.in.Order), modelOrder(r.in.Model)...) {
		if len(byPlugin[p]) > 0 && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// modelOrder recovers the plugin order from the model's lists, each of which is in
// plugin order: plugin a comes before b when some list has a's items before b's. What
// no list orders is broken by name, so the result is stable but may differ from the
// resolved order; that is why Input.Order exists.
func modelOrder(m *model.Model) []string {
	var seqs [][]string
	seq := func(n int, by func(int) string) {
		s := make([]string, n)
		for i := range n {
			s[i] = by(i)
		}
		seqs = append(seqs, s)
	}
	k := m.Kubernetes
	seq(len(k.Objects), func(i int) string { return k.Objects[i].By })
	seq(len(k.HelmReleases), func(i int) string { return k.HelmReleases[i].By })
	seq(len(k.Patches), func(i int) string { return k.Patches[i].By })
	seq(len(m.Cloud.Patches), func(i int) string { return m.Cloud.Patches[i].By })
	for _, role := range sortedKeys(m.Cloud.IAM) {
		st := m.Cloud.IAM[role]
		seq(len(st), func(i int) string { return st[i].By })
	}
	for _, name := range m.PoolNames() {
		p := m.Pools[name]
		seq(len(p.Hooks), func(i int) string { return p.Hooks[i].By })
		seq(len(p.Kubelet.Taints), func(i int) string { return p.Kubelet.Taints[i].By })
	}
	after := map[string]map[string]bool{} // plugin -> plugins that must come before it
	for _, s := range seqs {
		for i, p := range s {
			if after[p] == nil {
				after[p] = map[string]bool{}
			}
			if i > 0 && s[i-1] != p {
				after[p][s[i-1]] = true
			}
		}
	}
	var out []string
	for len(after) > 0 {
		var ready []string
		for p, before := range after {
			if len(before) == 0 {
				ready = append(ready, p)
			}
		}
		if len(ready) == 0 {
			// The lists disagree, which a model built by Add cannot do; fall back to names.
			ready = sortedKeys(after)
		}
		p := slices.Min(ready)
		out = append(out, p)
		delete(after, p)
		for _, before := range after {
			delete(before, p)
		}
	}
	return out
}

func sourceComment(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
