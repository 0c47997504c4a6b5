package ssa

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeplug/kubeplug/pkg/deploy/internal/jsonenc"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
)

// Live is what the cluster holds of a plugin's objects, as LiveObjects found it.
type Live struct {
	// Objects are the live objects read in full, by ObjRef key: compare them
	// with what is desired (Unchanged).
	Objects map[string]*unstructured.Unstructured
	// Current are the objects still at the resourceVersion recorded for them,
	// by ObjRef key, with that resourceVersion: nothing to read, apply or wait
	// for.
	Current map[string]string
}

// fullReadShare is the share of a scope's objects above which the changed ones
// are read with one LIST rather than one GET each.
const fullReadShare = 4

// LiveObjects finds what the cluster holds of a plugin's objects, with one LIST
// per resource and namespace (label selector on the plugin) instead of one
// request per object. recorded says, by ObjRef key, the resourceVersion at which
// an object last held what is applied to it now, ready (state.Record's
// ResourceVersions, of the objects whose recorded digest is the one desired
// now: the caller's to choose): for a scope with recorded objects the LIST is
// of metadata only (protobuf), and an object still at its recorded
// resourceVersion is Current; the others that exist are then read in full (one
// GET each, or one LIST when many changed). A scope without recorded objects is
// listed in full. Kinds that cannot be listed yet (a CRD in this very wave) are
// left out, and so are objects a request failed for: they are simply applied,
// which reports any real problem.
func (a *Applier) LiveObjects(ctx context.Context, plugin string, objs []*unstructured.Unstructured, recorded map[string]string) Live {
	scopes := map[scope][]*unstructured.Unstructured{}
	var order []scope
	for _, o := range objs {
		m, err := a.c.Mapping(o.GroupVersionKind())
		if err != nil {
			continue
		}
		s := scope{m.Resource, o.GetNamespace()}
		if scopes[s] == nil {
			order = append(order, s)
		}
		scopes[s] = append(scopes[s], o)
	}
	live := Live{Objects: map[string]*unstructured.Unstructured{}, Current: map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, min(a.opts.Concurrency, 8))
	for _, s := range order {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			objects, current := a.liveIn(ctx, plugin, s.gvr, s.ns, scopes[s], recorded)
			mu.Lock()
			defer mu.Unlock()
			maps.Copy(live.Objects, objects)
			maps.Copy(live.Current, current)
		})
	}
	wg.Wait()
	return live
}

// liveIn is LiveObjects for the desired objects of one resource in one namespace.
func (a *Applier) liveIn(ctx context.Context, plugin string, gvr schema.GroupVersionResource, ns string, want []*unstructured.Unstructured, recorded map[string]string) (map[string]*unstructured.Unstructured, map[string]string) {
	sel := metav1.ListOptions{LabelSelector: kube.LabelPlugin + "=" + plugin}
	if !slices.ContainsFunc(want, func(o *unstructured.Unstructured) bool { return recorded[kube.RefOf(o).Key()] != "" }) {
		return a.listFull(ctx, gvr, ns, sel), nil
	}
	items, err := a.metadataList(ctx, gvr, ns, plugin)
	if err != nil {
		return a.listFull(ctx, gvr, ns, sel), nil
	}
	meta := make(map[string]*metav1.PartialObjectMetadata, len(items))
	gk := want[0].GroupVersionKind().GroupKind()
	for i := range items {
		m := &items[i]
		meta[kube.ObjRef{Group: gk.Group, Kind: gk.Kind, Namespace: m.Namespace, Name: m.Name}.Key()] = m
	}
	current := map[string]string{}
	var changed []*unstructured.Unstructured
	for _, o := range want {
		key := kube.RefOf(o).Key()
		m := meta[key]
		switch {
		case m == nil:
			// Not there: applied.
		case recorded[key] != "" && m.ResourceVersion == recorded[key]:
			current[key] = m.ResourceVersion
		default:
			changed = append(changed, o)
		}
	}
	if len(changed) == 0 {
		return nil, current
	}
	if len(changed)*fullReadShare > len(want) {
		full := a.listFull(ctx, gvr, ns, sel)
		for key := range current {
			delete(full, key)
		}
		return full, current
	}
	objects := map[string]*unstructured.Unstructured{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, a.opts.Concurrency)
	for _, o := range changed {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			u, err := a.c.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
			if err != nil {
				return // gone meanwhile, or unreadable: applied
			}
			if u.GetAPIVersion() == "" {
				u.SetAPIVersion(gvr.GroupVersion().String())
			}
			mu.Lock()
			objects[kube.RefOf(u).Key()] = u
			mu.Unlock()
		})
	}
	wg.Wait()
	return objects, current
}

// scope is one resource in one namespace ("" for cluster-scoped ones).
type scope struct {
	gvr schema.GroupVersionResource
	ns  string
}

// sharedList is one metadata LIST of every plugin's objects in a scope, by
// plugin (metadataList).
type sharedList struct {
	once     sync.Once
	at       time.Time
	byPlugin map[string][]metav1.PartialObjectMetadata
	err      error
	// answered are the plugins it answered for (guarded by Applier.listMu):
	// once each, as a plugin's objects are read once per apply.
	answered map[string]bool
}

// sharedFor is how long a shared LIST answers for a scope: the read-ahead of
// one run's plugins, not the next run's.
const sharedFor = 2 * time.Second

// metadataList returns the metadata of plugin's objects in scope (gvr, ns).
// The first plugin to ask lists its own (one LIST with its label); when more
// plugins of the run read the same scope — a wide apply, a re-apply of many —
// one LIST of every kubeplug object there answers them all, so that twenty
// plugins' objects in one namespace are one request rather than twenty, each
// of which the server answered by filtering all of them. A scope this Applier
// has written since, a shared LIST older than sharedFor, and a plugin it
// answered for already (a second apply by the same Deployer) are listed for the
// plugin alone again: what a plugin compares is never older than the
// read-ahead of its own LIST would be.
func (a *Applier) metadataList(ctx context.Context, gvr schema.GroupVersionResource, ns, plugin string) ([]metav1.PartialObjectMetadata, error) {
	k := scope{gvr, ns}
	a.listMu.Lock()
	if a.askers[k] == nil {
		a.askers[k] = map[string]bool{}
	}
	a.askers[k][plugin] = true
	var sl *sharedList
	if !a.written[k] && len(a.askers[k]) > 1 {
		if sl = a.shared[k]; sl == nil {
			sl = &sharedList{answered: map[string]bool{}}
			a.shared[k] = sl
		}
	}
	a.listMu.Unlock()
	if sl != nil {
		sl.once.Do(func() {
			list, err := a.c.Metadata.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelPlugin})
			sl.at, sl.err = time.Now(), err
			if err != nil {
				return
			}
			sl.byPlugin = map[string][]metav1.PartialObjectMetadata{}
			for _, m := range list.Items {
				p := m.Labels[kube.LabelPlugin]
				sl.byPlugin[p] = append(sl.byPlugin[p], m)
			}
		})
		a.listMu.Lock()
		fresh := sl.err == nil && !a.written[k] && time.Since(sl.at) < sharedFor && !sl.answered[plugin]
		if fresh {
			sl.answered[plugin] = true
		}
		a.listMu.Unlock()
		if fresh {
			return sl.byPlugin[plugin], nil
		}
	}
	list, err := a.c.Metadata.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelPlugin + "=" + plugin})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// wrote notes that this Applier is about to change an object of resource gvr in
// namespace ns: shared LISTs of that scope no longer answer (metadataList).
func (a *Applier) wrote(gvr schema.GroupVersionResource, ns string) {
	a.listMu.Lock()
	a.written[scope{gvr, ns}] = true
	a.listMu.Unlock()
}

// listFull lists a plugin's objects of one resource in one namespace in full,
// by ObjRef key; none when the LIST fails.
func (a *Applier) listFull(ctx context.Context, gvr schema.GroupVersionResource, ns string, sel metav1.ListOptions) map[string]*unstructured.Unstructured {
	list, err := a.c.Dynamic.Resource(gvr).Namespace(ns).List(ctx, sel)
	if err != nil {
		return nil
	}
	out := make(map[string]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		u := &list.Items[i]
		if u.GetAPIVersion() == "" {
			u.SetAPIVersion(gvr.GroupVersion().String())
		}
		out[kube.RefOf(u).Key()] = u
	}
	return out
}

// AnnotationDigest is the annotation in which earlier kubeplugs kept the
// digest of the content they last applied to an object. It is no longer sent —
// the release record keeps the digests (state.Record's Digests) — so server-side
// apply removes it from an object at the object's next apply: Digest drops it
// from what is applied, and drift does not report it.
const AnnotationDigest = "kubeplug.dev/applied-digest"

// Digest is the digest of the object's content as it is applied: what the
// release record keeps for it, so that a later apply can tell that the content
// is unchanged without sending it. An older kubeplug's digest annotation is
// removed from the object first: it is not applied again.
func Digest(o *unstructured.Unstructured) string {
	if ann := o.GetAnnotations(); ann != nil {
		if _, ok := ann[AnnotationDigest]; ok {
			delete(ann, AnnotationDigest)
			o.SetAnnotations(ann)
		}
	}
	raw, ok := jsonenc.Append(make([]byte, 0, 1024), o.Object)
	if !ok {
		raw, _ = json.Marshal(o.Object) // plain JSON values: cannot fail
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16])
}

// Unchanged reports whether an apply of desired, whose content has digest
// (Digest), would change nothing: lastApplied, the digest the release record
// keeps for the object, is the same (so no field was added or dropped since the
// last apply; an object with none recorded is applied), and every field desired
// sets is in live with the same value (so no one changed it out of band; fields
// the server defaults or other managers set are ignored). Drift is therefore
// corrected on every apply — except at the ignored JSON pointers (and below
// them), which others own by the plugin's declaration: an autoscaler's
// /spec/replicas is not fought on every apply. A change of the plugin's own
// content is applied without the ignored fields that another field manager owns
// (YieldIgnored).
func Unchanged(desired, live *unstructured.Unstructured, digest, lastApplied string, ignore []string) bool {
	if live == nil || lastApplied == "" || lastApplied != digest {
		return false
	}
	d := desired.DeepCopy().Object
	delete(d, "status")
	return subset(d, live.Object, "", ignore)
}

// subset reports whether every value in want is in have, at path (a JSON pointer),
// skipping the ignored pointers.
//
// Branches: one case per JSON kind (object, list, scalar), recursing; ignored
// paths are computed only when needed, as this runs for every field of every
// object.
func subset(want, have any, path string, ignore []string) bool {
	if Ignored(path, ignore) {
		return true
	}
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			child := ""
			if len(ignore) > 0 { // paths only when needed: this runs for every field of every object
				child = path + "/" + EscapePointer(k)
			}
			hv, ok := h[k]
			if !ok {
				if isEmpty(wv) || Ignored(child, ignore) {
					continue
				}
				return false
			}
			if !subset(wv, hv, child, ignore) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			child := ""
			if len(ignore) > 0 {
				child = path + "/" + strconv.Itoa(i)
			}
			if !subset(w[i], h[i], child, ignore) {
				return false
			}
		}
		return true
	case nil:
		return have == nil
	}
	return reflect.DeepEqual(want, have) || fmt.Sprint(want) == fmt.Sprint(have) && sameNumber(want, have)
}

// underPointer reports whether path is pointer p or lies below it.
func underPointer(path, p string) bool {
	return path == p || strings.HasPrefix(path, p+"/")
}

// Ignored reports whether path is one of the ignored pointers or below one.
func Ignored(path string, ignore []string) bool {
	return slices.ContainsFunc(ignore, func(p string) bool { return underPointer(path, p) })
}

// EscapePointer escapes a key for a JSON pointer (RFC 6901).
func EscapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// isEmpty is a value the API server drops when it stores an object.
func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	case string:
		return t == ""
	}
	return false
}

// sameNumber lets an int64 from a manifest equal the float64 or int64 the server
// returns for the same number.
func sameNumber(a, b any) bool {
	num := func(v any) bool {
		switch v.(type) {
		case int, int32, int64, float32, float64:
			return true
		}
		return false
	}
	return num(a) && num(b)
}

// YieldIgnored returns desired without the ignored fields (DriftIgnore) that
// another field manager owns on live, so that an apply of a changed object neither
// fails with a conflict over them nor, forced, takes them back: an autoscaler keeps
// /spec/replicas. A field kubeplug alone owns is still applied (leaving it out
// would delete it), as are fields of objects not yet in the cluster. desired is not
// modified; it is returned as is when nothing is left out.
func YieldIgnored(desired, live *unstructured.Unstructured, ignore []string) *unstructured.Unstructured {
	if live == nil || len(ignore) == 0 {
		return desired
	}
	var out *unstructured.Unstructured
	for _, p := range ignore {
		tokens, ok := mapPointer(p)
		if !ok {
			continue // into a list: the managed fields name its items by key, not index
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(live.Object, tokens...); !found {
			continue
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(desired.Object, tokens...); !found {
			continue
		}
		if len(OwnersOf(live.GetManagedFields(), p)) == 0 {
			continue
		}
		if out == nil {
			out = desired.DeepCopy()
		}
		unstructured.RemoveNestedField(out.Object, tokens...)
	}
	if out == nil {
		return desired
	}
	return out
}

// mapPointer splits a JSON pointer into unescaped map keys; false when a token is
// a list index.
func mapPointer(p string) ([]string, bool) {
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		if _, err := strconv.Atoi(t); err == nil {
			return nil, false
		}
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, true
}
