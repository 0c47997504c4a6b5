package ssa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/kubeplug/kubeplug/internal/faultpoint"
	"github.com/kubeplug/kubeplug/pkg/deploy/internal/jsonenc"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
)

// Options configure an Applier. The zero value of each field means its default.
type Options struct {
	// Concurrency bounds the API requests in flight. Default 32.
	Concurrency int
	// Timeout bounds each wait (WaitEstablished, WaitReady). Default 5m.
	Timeout time.Duration
	// DryRun applies with the server's dry run: validated and defaulted, not persisted.
	DryRun bool
	// ForceConflicts takes ownership of fields another field manager owns, instead
	// of failing with a conflict that names the manager.
	ForceConflicts bool
}

// Applier applies, waits for and deletes objects in the cluster its client talks
// to. It is safe for concurrent use.
type Applier struct {
	c    *kube.Client
	opts Options
	// applies bounds the applies in flight across every ApplyAll call: units
	// applied at once share one pipe as wide as a wave's, the objects of the
	// highest priority first.
	applies *pipe
	// idle hands an apply to a worker waiting for one (run).
	idle chan func()

	listMu sync.Mutex // guards what follows (metadataList)
	// askers are the plugins that listed each scope, shared the LIST of every
	// plugin's objects there, and written the scopes this Applier changed.
	askers  map[scope]map[string]bool
	shared  map[scope]*sharedList
	written map[scope]bool
}

// New returns an Applier for the cluster c talks to.
func New(c *kube.Client, opts Options) *Applier {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 32
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	return &Applier{
		c: c, opts: opts, applies: newPipe(opts.Concurrency), idle: make(chan func()),
		askers: map[scope]map[string]bool{}, shared: map[scope]*sharedList{}, written: map[scope]bool{},
	}
}

// Prepare makes a plugin's object what is applied and compared for drift: its
// namespace resolved and the label naming its plugin — the one label the
// plugin's objects are listed by (LiveObjects), nothing more, as whatever is
// sent costs the API server at every apply — and returns the digest of its
// content (Digest).
func (a *Applier) Prepare(o *unstructured.Unstructured, plugin string) string {
	// Resolve scope now, so that the record holds the namespace a namespaced object
	// without one will land in, and the digest covers it. Kinds whose CRD comes in
	// the same wave are resolved when they are applied.
	_, _ = a.c.Resource(o)
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[kube.LabelPlugin] = plugin
	o.SetLabels(labels)
	return Digest(o)
}

// Result is the outcome of applying one object: what the server stored, or why not.
type Result struct {
	Obj *unstructured.Unstructured
	Err error
}

// ApplyAll applies objects concurrently and returns one Result per object, in
// their order. Options.Concurrency bounds the applies in flight of every
// ApplyAll call of the Applier together, not of each; when the pipe is full,
// a place that frees up goes to the call of the highest priority waiting, the
// first come among equals. An object for which metadataOnly (when not nil) is
// true is answered with its metadata only (ApplyMetadata).
func (a *Applier) ApplyAll(ctx context.Context, objs []*unstructured.Unstructured, priority int, metadataOnly func(*unstructured.Unstructured) bool) []Result {
	out := make([]Result, len(objs))
	var wg sync.WaitGroup
	for i, o := range objs {
		a.applies.acquire(priority)
		wg.Add(1)
		a.run(func() {
			defer wg.Done()
			defer a.applies.release()
			if metadataOnly != nil && metadataOnly(o) {
				out[i].Obj, out[i].Err = a.ApplyMetadata(ctx, o)
			} else {
				out[i].Obj, out[i].Err = a.Apply(ctx, o)
			}
			if out[i].Err == nil {
				faultpoint.Hit("apply:object-applied")
			}
		})
	}
	wg.Wait()
	return out
}

// Apply server-side applies one object and returns what the server stored.
func (a *Applier) Apply(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := a.c.Resource(o)
	if err != nil {
		return nil, err
	}
	if m, err := a.c.Mapping(o.GroupVersionKind()); err == nil && !a.opts.DryRun {
		a.wrote(m.Resource, o.GetNamespace())
	}
	opts := metav1.ApplyOptions{FieldManager: kube.FieldManager, Force: a.opts.ForceConflicts}
	if a.opts.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var got *unstructured.Unstructured
	err = a.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		got, err = ri.Apply(ctx, o.GetName(), o, opts)
		return err
	})
	if err != nil {
		return nil, DescribeApplyError(err)
	}
	if got.GetDeletionTimestamp() != nil && o.GetAPIVersion() == "v1" && o.GetKind() == "Namespace" && !a.opts.DryRun {
		// A namespace still being deleted (a plugin removed just before, a cluster
		// stopped while its namespaces terminated) takes no new content: wait
		// until it is gone, then make it anew.
		if err := a.waitGone(ctx, ri, o.GetName()); err != nil {
			return nil, err
		}
		return a.Apply(ctx, o)
	}
	return got, nil
}

// workerIdle is how long an apply worker waits for the next apply before it
// ends.
const workerIdle = time.Second

// run runs f on an idle apply worker, or on a new one when none is idle. A
// goroutine per apply grew its stack anew through the HTTP/2 client's calls at
// every apply (~20 µs of CPU each); workers keep theirs. Applies in flight are
// bounded by a.applies, and so are the busy workers; an idle worker ends after
// workerIdle.
func (a *Applier) run(f func()) {
	select {
	case a.idle <- f:
	default:
		go a.worker(f)
	}
}

func (a *Applier) worker(f func()) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		f()
		t.Reset(workerIdle)
		select {
		case f = <-a.idle:
		case <-t.C:
			return
		}
	}
}

// ApplyMetadata server-side applies one object as Apply does, and returns what
// the server stored of its metadata only: apiVersion, kind and metadata
// without managedFields. The server answers with a PartialObjectMetadata in
// protobuf, which costs it and this client a fraction of encoding and decoding
// the whole object as JSON: for the many objects whose readiness is their
// existence (StatusFree) and whose answer is only read for its
// resourceVersion, that is all an apply needs.
func (a *Applier) ApplyMetadata(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := o.GroupVersionKind()
	m, err := a.c.Mapping(gvk)
	if err != nil {
		return nil, err
	}
	if _, err := a.c.Resource(o); err != nil { // sets the namespace as Apply does
		return nil, err
	}
	if !a.opts.DryRun {
		a.wrote(m.Resource, o.GetNamespace())
	}
	ri := a.c.Metadata.Resource(m.Resource)
	var client interface {
		Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*metav1.PartialObjectMetadata, error)
	} = ri
	if o.GetNamespace() != "" {
		client = ri.Namespace(o.GetNamespace())
	}
	body, err := jsonenc.Marshal(o.Object)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", kube.RefOf(o), err)
	}
	opts := metav1.PatchOptions{FieldManager: kube.FieldManager, Force: &a.opts.ForceConflicts}
	if a.opts.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var got *metav1.PartialObjectMetadata
	err = a.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		got, err = client.Patch(ctx, o.GetName(), types.ApplyPatchType, body, opts)
		return err
	})
	if err != nil {
		return nil, DescribeApplyError(err)
	}
	return metadataObject(gvk, &got.ObjectMeta), nil
}

// metadataObject is an object of kind gvk with metadata md, without its
// managedFields.
func metadataObject(gvk schema.GroupVersionKind, md *metav1.ObjectMeta) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	u.SetName(md.Name)
	if md.Namespace != "" {
		u.SetNamespace(md.Namespace)
	}
	u.SetUID(md.UID)
	u.SetResourceVersion(md.ResourceVersion)
	if md.Generation != 0 {
		u.SetGeneration(md.Generation)
	}
	u.SetCreationTimestamp(md.CreationTimestamp)
	u.SetDeletionTimestamp(md.DeletionTimestamp)
	u.SetLabels(md.Labels)
	u.SetAnnotations(md.Annotations)
	u.SetFinalizers(md.Finalizers)
	u.SetOwnerReferences(md.OwnerReferences)
	return u
}

// StatusFree reports whether objects of kind gk have no status: a built-in
// kind whose readiness is its existence, so an apply needs nothing of the
// server's answer but its metadata.
func StatusFree(gk schema.GroupKind) bool {
	switch gk.Group {
	case "":
		switch gk.Kind {
		case "ConfigMap", "Secret", "ServiceAccount", "LimitRange", "PodTemplate":
			return true
		}
	case "rbac.authorization.k8s.io":
		return gk.Kind == "Role" || gk.Kind == "ClusterRole" || gk.Kind == "RoleBinding" || gk.Kind == "ClusterRoleBinding"
	case "scheduling.k8s.io":
		return gk.Kind == "PriorityClass"
	case "storage.k8s.io":
		return gk.Kind == "StorageClass" || gk.Kind == "CSIDriver"
	case "node.k8s.io":
		return gk.Kind == "RuntimeClass"
	}
	return false
}

// waitGone waits until the object name that ri serves is deleted, for at most
// Options.Timeout.
func (a *Applier) waitGone(ctx context.Context, ri dynamic.ResourceInterface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		cur, err := ri.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			return false, nil // retried until the timeout
		}
		return cur.GetDeletionTimestamp() == nil, nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s is being deleted and was not gone after %s (its finalizers or content remain): %w", name, a.opts.Timeout, err)
	}
	return nil
}

// DescribeApplyError keeps the API server's own words, which name the field and,
// for a conflict, the field manager that owns it.
func DescribeApplyError(err error) error {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		switch {
		case apierrors.IsConflict(err):
			return fmt.Errorf("field conflict (another field manager owns it; apply with --force-conflicts to take it over): %s", st.Message)
		case apierrors.IsInvalid(err):
			return fmt.Errorf("rejected by the API server: %s", st.Message)
		}
		return fmt.Errorf("%s", st.Message)
	}
	return err
}

// ResourcePolicy is the annotation by which Helm leaves an object in the cluster
// when its release no longer has it; KeepPolicy is its value that does so.
const (
	ResourcePolicy = "helm.sh/resource-policy"
	KeepPolicy     = "keep"
)

// DeleteAll deletes objects stage by stage in DeleteStages order (each stage's
// objects concurrently) and returns how many existed. An object annotated
// helm.sh/resource-policy: keep in the cluster is left there, as Helm leaves it,
// and returned in kept (sorted): a CRD kept so keeps every custom resource of it.
func (a *Applier) DeleteAll(ctx context.Context, refs []kube.ObjRef) (n int, kept []kube.ObjRef, err error) {
	refs, kept, err = a.withoutKept(ctx, refs)
	if err != nil {
		return 0, nil, err
	}
	n, err = a.deleteAll(ctx, refs)
	return n, kept, err
}

// withoutKept splits off the objects whose live annotations say keep.
func (a *Applier) withoutKept(ctx context.Context, refs []kube.ObjRef) (rest, kept []kube.ObjRef, err error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	keep := make([]bool, len(refs))
	sem := make(chan struct{}, a.opts.Concurrency)
	for i, r := range refs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ri, err := a.c.ResourceFor(r)
			if err != nil {
				if !errors.Is(err, kube.ErrNoKind) {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", r, err))
					mu.Unlock()
				}
				return
			}
			var got *unstructured.Unstructured
			err = a.c.Retry(ctx, func(ctx context.Context) error {
				var err error
				got, err = ri.Get(ctx, r.Name, metav1.GetOptions{})
				return err
			})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", r, err))
				mu.Unlock()
			default:
				keep[i] = got.GetAnnotations()[ResourcePolicy] == KeepPolicy
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	for i, r := range refs {
		if keep[i] {
			kept = append(kept, r)
		} else {
			rest = append(rest, r)
		}
	}
	slices.SortFunc(kept, func(a, b kube.ObjRef) int { return strings.Compare(a.String(), b.String()) })
	return rest, kept, nil
}

func (a *Applier) deleteAll(ctx context.Context, refs []kube.ObjRef) (int, error) {
	byStage := map[Stage][]kube.ObjRef{}
	// Custom resources of the CRDs among refs go first, and are waited for: their
	// operator (among refs too, as a rule) must still run to clear their
	// finalizers, or they and their CRD stay Terminating for ever.
	crdGroups := map[string]bool{}
	for _, r := range refs {
		if r.Group == "apiextensions.k8s.io" && r.Kind == "CustomResourceDefinition" {
			if _, g, ok := strings.Cut(r.Name, "."); ok {
				crdGroups[g] = true
			}
		}
	}
	var custom []kube.ObjRef
	for _, r := range refs {
		s := StageOf(schemaGroupKind(r))
		if s == StageContent && crdGroups[r.Group] {
			custom = append(custom, r)
			continue
		}
		byStage[s] = append(byStage[s], r)
	}
	n := 0
	var errs []error
	for _, stage := range DeleteStages() {
		if stage == StageContent && len(custom) > 0 {
			m, err := a.deleteAndWait(ctx, custom)
			n += m
			if err != nil {
				// Keep the rest (the operator) so that a re-run can finish.
				return n, err
			}
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, a.opts.Concurrency)
		for _, r := range byStage[stage] {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				existed, err := a.Delete(ctx, r)
				if existed {
					faultpoint.Hit("delete:object-deleted")
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", r, err))
				} else if existed {
					n++
				}
			})
		}
		wg.Wait()
	}
	return n, errors.Join(errs...)
}

// deleteAndWait deletes custom resources and waits until they are gone, so that
// the finalizers their operator set are done before the operator is removed. It
// gives up after Options.Timeout naming what is left and its finalizers.
func (a *Applier) deleteAndWait(ctx context.Context, refs []kube.ObjRef) (int, error) {
	n := 0
	for _, r := range refs {
		existed, err := a.Delete(ctx, r)
		if err != nil {
			return n, fmt.Errorf("%s: %w", r, err)
		}
		if existed {
			n++
		}
	}
	if a.opts.DryRun {
		return n, nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	pending := slices.Clone(refs)
	for {
		var left []string
		next := pending[:0]
		for _, r := range pending {
			ri, err := a.c.ResourceFor(r)
			if errors.Is(err, kube.ErrNoKind) {
				continue
			}
			if err != nil {
				return n, err
			}
			got, err := ri.Get(ctx, r.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			next = append(next, r)
			if err == nil {
				left = append(left, fmt.Sprintf("%s (finalizers %v)", r, got.GetFinalizers()))
			} else {
				left = append(left, fmt.Sprintf("%s (%v)", r, err))
			}
		}
		pending = next
		if len(pending) == 0 {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("custom resources still terminating after %s, so their operator was kept to finish them (is it running?): %s", a.opts.Timeout, strings.Join(left, "; "))
		case <-time.After(pollInterval):
		}
	}
}

// Delete deletes one object (background propagation) and reports whether it
// existed. An object whose kind is no longer served went with its definition.
func (a *Applier) Delete(ctx context.Context, r kube.ObjRef) (bool, error) {
	ri, err := a.c.ResourceFor(r)
	if err != nil {
		if errors.Is(err, kube.ErrNoKind) {
			return false, nil // its CRD is gone, and the object with it
		}
		return false, err
	}
	if m, err := a.c.Mapping(schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}); err == nil && !a.opts.DryRun {
		a.wrote(m.Resource, r.Namespace)
	}
	policy := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &policy}
	if a.opts.DryRun {
		// The API server runs admission and reports what it would delete.
		opts.DryRun = []string{metav1.DryRunAll}
	}
	err = a.c.Retry(ctx, func(ctx context.Context) error {
		return ri.Delete(ctx, r.Name, opts)
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// Ignore names fields, by JSON pointer, of a plugin's objects that others may
// change (an autoscaler setting /spec/replicas): not drift, and no reason to
// re-apply. Empty selector fields match every object.
type Ignore struct {
	// APIVersion, when set, restricts the rule to one API version ("apps/v1").
	APIVersion string
	// Kind of the objects; empty matches every kind.
	Kind string
	// Namespace and Name, when set, restrict the rule to one object.
	Namespace, Name string
	// Paths are JSON pointers into the object; a path covers everything below it.
	Paths []string
}

func (i Ignore) matches(o *unstructured.Unstructured) bool {
	return (i.APIVersion == "" || i.APIVersion == o.GetAPIVersion()) &&
		(i.Kind == "" || i.Kind == o.GetKind()) &&
		(i.Namespace == "" || i.Namespace == o.GetNamespace()) &&
		(i.Name == "" || i.Name == o.GetName())
}

// IgnoredPaths returns the JSON pointers of o that the rules ignore.
func IgnoredPaths(rules []Ignore, o *unstructured.Unstructured) []string {
	var out []string
	for _, r := range rules {
		if r.matches(o) {
			out = append(out, r.Paths...)
		}
	}
	return out
}

// OwnersOf names the field managers other than kubeplug whose managed fields
// contain the field at path. It follows map keys only: below a list item (whose
// managed-fields key is its merge key, not its index) the owner of the list item is
// reported.
func OwnersOf(entries []metav1.ManagedFieldsEntry, path string) []string {
	tokens := strings.Split(strings.TrimPrefix(path, "/"), "/")
	var out []string
	for _, e := range entries {
		if e.Manager == kube.FieldManager || e.FieldsV1 == nil || slices.Contains(out, e.Manager) {
			continue
		}
		var set map[string]any
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &set) != nil {
			continue
		}
		if ownsPath(set, tokens) {
			out = append(out, e.Manager)
		}
	}
	slices.Sort(out)
	return out
}

func ownsPath(set map[string]any, tokens []string) bool {
	for i, t := range tokens {
		t = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		next, ok := set["f:"+t].(map[string]any)
		if !ok {
			// A list index: the managed fields name items by key or value, which the
			// pointer does not carry; whoever owns an item of the list is a candidate.
			if _, err := strconv.Atoi(t); err == nil && i > 0 {
				for k := range set {
					if strings.HasPrefix(k, "k:") || strings.HasPrefix(k, "i:") || strings.HasPrefix(k, "v:") {
						return true
					}
				}
			}
			return false
		}
		set = next
	}
	return true
}
