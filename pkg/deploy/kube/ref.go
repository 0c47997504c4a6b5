package kube

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ObjRef identifies an object across versions of its API.
type ObjRef struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String renders the reference as Kind/namespace/name (group-qualified kinds).
func (r ObjRef) String() string {
	k := r.Kind
	if r.Group != "" {
		k += "." + r.Group
	}
	if r.Namespace == "" {
		return k + "/" + r.Name
	}
	return k + "/" + r.Namespace + "/" + r.Name
}

// Key identifies the object regardless of its API version.
func (r ObjRef) Key() string { return r.Group + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name }

// RefOf is the reference of an object.
func RefOf(u *unstructured.Unstructured) ObjRef {
	gvk := u.GroupVersionKind()
	return ObjRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// RefsOf is the references of objects, in their order.
func RefsOf(objs []*unstructured.Unstructured) []ObjRef {
	out := make([]ObjRef, len(objs))
	for i, o := range objs {
		out[i] = RefOf(o)
	}
	return out
}

// SortRefs sorts refs by Key, in place, and returns them.
func SortRefs(refs []ObjRef) []ObjRef {
	keyed := make([]keyedRef, len(refs))
	for i, r := range refs {
		keyed[i] = keyedRef{r.Key(), r}
	}
	return sortInto(keyed, refs)
}

// keyedRef is a ref with its Key, made once: a sort that made it at every
// comparison spent most of an unchanged re-apply's inventory work on it.
type keyedRef struct {
	key string
	ref ObjRef
}

// sortInto sorts keyed by key and writes their refs, in that order, into out
// (of the same length), which it returns.
func sortInto(keyed []keyedRef, out []ObjRef) []ObjRef {
	slices.SortFunc(keyed, func(a, b keyedRef) int { return strings.Compare(a.key, b.key) })
	for i := range keyed {
		out[i] = keyed[i].ref
	}
	return out
}

// Union returns a ∪ b (one entry per Key, the first seen), sorted.
func Union(a, b []ObjRef) []ObjRef {
	seen := make(map[string]bool, len(a)+len(b))
	keyed := make([]keyedRef, 0, len(a)+len(b))
	for _, refs := range [][]ObjRef{a, b} {
		for _, r := range refs {
			if k := r.Key(); !seen[k] {
				seen[k] = true
				keyed = append(keyed, keyedRef{k, r})
			}
		}
	}
	if len(keyed) == 0 {
		return nil
	}
	return sortInto(keyed, make([]ObjRef, len(keyed)))
}

// Minus returns the refs of a that b does not have, in a's order.
func Minus(a, b []ObjRef) []ObjRef {
	in := map[string]bool{}
	for _, r := range b {
		in[r.Key()] = true
	}
	var out []ObjRef
	for _, r := range a {
		if !in[r.Key()] {
			out = append(out, r)
		}
	}
	return out
}

// ReleaseRef names a Helm release in an inventory.
type ReleaseRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (r ReleaseRef) String() string { return r.Namespace + "/" + r.Name }

// SortReleaseRefs sorts refs by namespace/name, in place, and returns them.
func SortReleaseRefs(refs []ReleaseRef) []ReleaseRef {
	slices.SortFunc(refs, func(a, b ReleaseRef) int { return strings.Compare(a.String(), b.String()) })
	return refs
}
