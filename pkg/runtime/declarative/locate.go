package declarative

import (
	"path"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// componentFields maps a model control-plane component to its field in
// spec.contributes.controlPlane.
var componentFields = map[string]string{
	model.Etcd:                  "etcd",
	model.KubeAPIServer:         "apiServer",
	model.KubeControllerManager: "controllerManager",
	model.KubeScheduler:         "scheduler",
}

// ContributionPtr returns the JSON pointer, in pkg's plugin.yaml, of the
// declarative contribution that set the model key key (the Field of a
// [model.Model.Add] diagnostic, such as "controlPlane.kube-apiserver.flags.v" or
// "nodes.workers.files./etc/x"). ok is false when pkg's manifest contributes
// nothing at that key: the contribution then came from plugin code, whose
// source has no position.
//
// A node key names the first of spec.contributes.nodes that sets it, whatever
// pools it is limited to: the pools are the cluster's, the manifest has one
// entry for all of them.
//
// Branches: one case per kind of contribution a key can name, mapping it to its
// JSON pointer in plugin.yaml.
func ContributionPtr(pkg *plugin.Package, key string) (ptr string, ok bool) {
	if pkg == nil || pkg.Manifest == nil || pkg.Manifest.Spec.Contributes == nil {
		return "", false
	}
	c := pkg.Manifest.Spec.Contributes
	const base = "/spec/contributes"
	switch {
	case strings.HasPrefix(key, "controlPlane."):
		return controlPlanePtr(c.ControlPlane, base+"/controlPlane", strings.TrimPrefix(key, "controlPlane."))
	case strings.HasPrefix(key, "nodes."):
		_, rest, found := strings.Cut(strings.TrimPrefix(key, "nodes."), ".")
		if !found {
			return "", false
		}
		for i, n := range c.Nodes {
			if p, ok := nodePtr(n, base+"/nodes/"+strconv.Itoa(i), rest); ok {
				return p, true
			}
		}
	case strings.HasPrefix(key, "cloud.resources.") && c.Cloud != nil:
		k := strings.TrimPrefix(key, "cloud.resources.")
		if _, ok := c.Cloud.Resources[k]; ok {
			return base + "/cloud/resources/" + escapePtr(k), true
		}
	case strings.HasPrefix(key, "cloud.outputs.") && c.Cloud != nil:
		k := strings.TrimPrefix(key, "cloud.outputs.")
		if _, ok := c.Cloud.Outputs[k]; ok {
			return base + "/cloud/outputs/" + escapePtr(k), true
		}
	case strings.HasPrefix(key, "cloud.pools[") && c.Cloud != nil:
		return poolPartPtr(c.Cloud.Pools, base+"/cloud/pools", strings.TrimPrefix(key, "cloud.pools["))
	case strings.HasPrefix(key, "cloud.stacks.") && c.Cloud != nil:
		name, _, _ := strings.Cut(strings.TrimPrefix(key, "cloud.stacks."), ".")
		for i, st := range c.Cloud.Stacks {
			if st.Name == name {
				return base + "/cloud/stacks/" + strconv.Itoa(i), true
			}
		}
	}
	return "", false
}

// poolPartPtr locates "I].SECTION.NAME" (or "I].SECTION", "I]") in
// spec.contributes.cloud.pools; a NAME may hold dots (a tag key).
func poolPartPtr(parts []v1alpha1.CloudPool, base, rest string) (string, bool) {
	is, rest, found := strings.Cut(rest, "]")
	i, err := strconv.Atoi(is)
	if !found || err != nil || i < 0 || i >= len(parts) {
		return "", false
	}
	ptr := base + "/" + is
	rest = strings.TrimPrefix(rest, ".")
	if rest == "" {
		return ptr, true
	}
	section, name, _ := strings.Cut(rest, ".")
	p := parts[i]
	var names map[string]bool
	switch section {
	case "iam":
		names = keys(p.IAM)
	case "tags":
		names = keys(p.Tags)
	case "securityGroupIngress":
		names = keys(p.SecurityGroupIngress)
	case "launchTemplate":
		names = keys(p.LaunchTemplate)
	case "patches", "pool", "role":
		return ptr + "/" + section, true
	default:
		return ptr, true
	}
	if names[name] {
		return ptr + "/" + section + "/" + escapePtr(name), true
	}
	return ptr + "/" + section, names != nil
}

// keys is the set of a map's keys.
func keys[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

func controlPlanePtr(cp *v1alpha1.ControlPlane, base, rest string) (string, bool) {
	if cp == nil {
		return "", false
	}
	if k, ok := strings.CutPrefix(rest, "featureGates."); ok {
		if _, set := cp.FeatureGates[k]; set {
			return base + "/featureGates/" + escapePtr(k), true
		}
		return "", false
	}
	name, rest, _ := strings.Cut(rest, ".")
	field, ok := componentFields[name]
	if !ok {
		return "", false
	}
	c := map[string]*v1alpha1.Component{"etcd": cp.Etcd, "apiServer": cp.APIServer, "controllerManager": cp.ControllerManager, "scheduler": cp.Scheduler}[field]
	if c == nil {
		return "", false
	}
	base += "/" + field
	if k, ok := strings.CutPrefix(rest, "flags."); ok {
		if _, set := c.Flags[k]; set {
			return base + "/flags/" + escapePtr(k), true
		}
	}
	if vn, ok := strings.CutPrefix(rest, "volumes."); ok {
		for i, v := range c.Volumes {
			if v.Name == vn {
				return base + "/volumes/" + strconv.Itoa(i), true
			}
		}
	}
	return "", false
}

// nodePtr locates rest, a pool key without its "nodes.POOL." prefix, in n.
//
// Branches: one case per kind of node contribution a key can name (files, units
// and their drop-ins, hooks, kubelet flags and labels), mapping the key to its
// JSON pointer in plugin.yaml.
func nodePtr(n v1alpha1.NodeContribution, base, rest string) (string, bool) {
	if p, ok := strings.CutPrefix(rest, "files."); ok {
		for i, f := range n.Files {
			if path.Clean(f.Path) == p {
				return base + "/files/" + strconv.Itoa(i), true
			}
		}
		return "", false
	}
	if u, ok := strings.CutPrefix(rest, "units."); ok {
		for i, su := range n.SystemdUnits {
			ptr := base + "/systemdUnits/" + strconv.Itoa(i)
			if dn, ok := strings.CutPrefix(u, su.Name+".dropIns."); ok {
				for j, d := range su.DropIns {
					if d.Name == dn {
						return ptr + "/dropIns/" + strconv.Itoa(j), true
					}
				}
			}
			if su.Name == u {
				return ptr, true
			}
		}
		return "", false
	}
	if h, ok := strings.CutPrefix(rest, "hooks."); ok {
		for i, nh := range n.Hooks {
			if nh.Name == h {
				return base + "/hooks/" + strconv.Itoa(i), true
			}
		}
		return "", false
	}
	k := n.Kubelet
	if k == nil {
		return "", false
	}
	base += "/kubelet"
	for field, m := range map[string]map[string]string{"flags": k.Flags, "labels": k.Labels} {
		if key, ok := strings.CutPrefix(rest, "kubelet."+field+"."); ok {
			if _, set := m[key]; set {
				return base + "/" + field + "/" + escapePtr(key), true
			}
			return "", false
		}
	}
	if key, ok := strings.CutPrefix(rest, "kubelet.featureGates."); ok {
		if _, set := k.FeatureGates[key]; set {
			return base + "/featureGates/" + escapePtr(key), true
		}
		return "", false
	}
	if t, ok := strings.CutPrefix(rest, "kubelet.taints."); ok {
		for i, taint := range k.Taints {
			if taint.Key+":"+taint.Effect == t {
				return base + "/taints/" + strconv.Itoa(i), true
			}
		}
	}
	return "", false
}

// PatchPtr returns the JSON pointer, in pkg's plugin.yaml, of operation j of
// the plugin's k-th patch of layer ("cloud" or "kubernetes") in the model, or
// of the patch itself when j is negative. A declarative plugin contributes its
// cloud patches as one model patch (k is 0) and each kubernetes patch as one.
// op and opPath are the operation as rendered; ok is false when the manifest's
// operation there is another one (the patch came from plugin code), while a
// templated path is taken as rendered from it.
//
// Branches: one case per patch layer (cloud's single patch, kubernetes' list of
// patches), each guarding the manifest's absent sections and out-of-range
// indexes before it names a pointer, as ContributionPtr does per kind.
func PatchPtr(pkg *plugin.Package, layer string, k, j int, op, opPath string) (ptr string, ok bool) {
	if pkg == nil || pkg.Manifest == nil || pkg.Manifest.Spec.Contributes == nil || k < 0 {
		return "", false
	}
	c := pkg.Manifest.Spec.Contributes
	var base string
	var ops []v1alpha1.PatchOp
	switch {
	case layer == "cloud" && c.Cloud != nil && k == 0:
		base, ops = "/spec/contributes/cloud/patches", c.Cloud.Patches
		if j < 0 {
			return base, len(ops) > 0
		}
		base += "/" + strconv.Itoa(j)
	case layer == "kubernetes" && c.Kubernetes != nil && k < len(c.Kubernetes.Patches):
		base = "/spec/contributes/kubernetes/patches/" + strconv.Itoa(k)
		if j < 0 {
			return base, true
		}
		ops = c.Kubernetes.Patches[k].Patch
		base += "/patch/" + strconv.Itoa(j)
	default:
		return "", false
	}
	if j >= len(ops) || ops[j].Op != op || (ops[j].Path != opPath && !strings.Contains(ops[j].Path, "{{")) {
		return "", false
	}
	return base, true
}
