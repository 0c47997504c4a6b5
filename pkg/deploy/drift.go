package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// DriftIgnore names fields, by JSON pointer, of a plugin's objects that others may
// change (an autoscaler setting /spec/replicas). Empty selector fields match every
// object.
type DriftIgnore struct {
	// APIVersion, when set, restricts the rule to one API version ("apps/v1").
	APIVersion string
	// Kind of the objects; empty matches every kind.
	Kind string
	// Namespace and Name, when set, restrict the rule to one object.
	Namespace, Name string
	// Paths are JSON pointers into the object; a path covers everything below it.
	Paths []string
}

func (i DriftIgnore) matches(o *unstructured.Unstructured) bool {
	return (i.APIVersion == "" || i.APIVersion == o.GetAPIVersion()) &&
		(i.Kind == "" || i.Kind == o.GetKind()) &&
		(i.Namespace == "" || i.Namespace == o.GetNamespace()) &&
		(i.Name == "" || i.Name == o.GetName())
}

// ignoredPaths returns the JSON pointers of o that the rules ignore.
func ignoredPaths(rules []DriftIgnore, o *unstructured.Unstructured) []string {
	var out []string
	for _, r := range rules {
		if r.matches(o) {
			out = append(out, r.Paths...)
		}
	}
	return out
}

// PluginDrift is how a plugin's objects in the cluster differ from what an apply
// would make them.
type PluginDrift struct {
	Plugin string `json:"plugin"`
	// Checked counts the objects compared.
	Checked int `json:"checked"`
	// Objects are the drifted objects only, sorted by reference.
	Objects []ObjectDrift `json:"objects,omitempty"`
}

// ObjectDrift is one drifted object.
type ObjectDrift struct {
	Object ObjRef `json:"object"`
	// Missing says the object is not in the cluster at all.
	Missing bool `json:"missing,omitempty"`
	// Fields are the changed fields, by JSON pointer.
	Fields []FieldDrift `json:"fields,omitempty"`
}

// FieldDrift is one field that differs. Values are JSON values; nil means the field
// is absent on that side. Values of Secrets are never reported: Redacted is set
// instead.
type FieldDrift struct {
	Path    string `json:"path"`
	Live    any    `json:"live,omitempty"`
	Desired any    `json:"desired,omitempty"`
	// Redacted says the values are hidden ("secret data changed").
	Redacted bool `json:"redacted,omitempty"`
	// ChangedBy names the field managers other than kubeplug that own the live
	// field, when the cluster records one (who edited it).
	ChangedBy []string `json:"changedBy,omitempty"`
}

// RedactedValue stands for the values of a drifted Secret field.
const RedactedValue = "(secret data changed)"

// Drift compares each unit's desired objects with the cluster: for every object it
// asks the API server what a forced server-side apply would store (a dry run, so
// nothing changes) and reports the fields where that differs from the live object —
// someone changed a field kubeplug applies since kubeplug applied it — and the
// objects that are missing. Metadata the server maintains (resourceVersion,
// generation, managedFields, timestamps), status, kubeplug's digest annotation and
// the unit's DriftIgnore paths are not drift. Helm releases' objects are not
// compared. The result has one entry per unit, in the units' order; the error
// joins one *UnitError per object that could not be compared.
func (d *Deployer) Drift(ctx context.Context, units []Unit) ([]PluginDrift, error) {
	out := make([]PluginDrift, len(units))
	type job struct {
		unit int
		obj  *unstructured.Unstructured
	}
	var jobs []job
	for i, u := range units {
		out[i] = PluginDrift{Plugin: u.Plugin, Checked: len(u.Objects)}
		for _, o := range u.Objects {
			o = o.DeepCopy()
			d.prepareObject(o, u.Plugin)
			jobs = append(jobs, job{unit: i, obj: o})
		}
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, d.opts.Concurrency)
	for _, j := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			u := units[j.unit]
			od, err := d.objectDrift(ctx, j.obj, ignoredPaths(u.DriftIgnore, j.obj))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, &UnitError{Plugin: u.Plugin, Object: refOf(j.obj).String(), Err: err})
				return
			}
			if od != nil {
				out[j.unit].Objects = append(out[j.unit].Objects, *od)
			}
		})
	}
	wg.Wait()
	for i := range out {
		slices.SortFunc(out[i].Objects, func(a, b ObjectDrift) int { return strings.Compare(a.Object.key(), b.Object.key()) })
	}
	return out, errors.Join(errs...)
}

// prepareObject makes a plugin's object what ApplyWave applies and Drift compares:
// its namespace resolved, kubeplug's labels, and the digest of the content.
func (d *Deployer) prepareObject(o *unstructured.Unstructured, plugin string) {
	// Resolve scope now, so that the record holds the namespace a namespaced object
	// without one will land in, and the digest covers it. Kinds whose CRD comes in
	// the same wave are resolved when they are applied.
	_, _ = d.mapping(o)
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelManagedBy] = FieldManager
	labels[LabelPlugin] = plugin
	o.SetLabels(labels)
	stampDigest(o)
}

// objectDrift compares one object; nil means no drift.
func (d *Deployer) objectDrift(ctx context.Context, o *unstructured.Unstructured, ignore []string) (*ObjectDrift, error) {
	ri, err := d.mapping(o)
	if err != nil {
		if strings.Contains(err.Error(), "serves no") {
			return &ObjectDrift{Object: refOf(o), Missing: true}, nil // its CRD is not there either
		}
		return nil, err
	}
	ref := refOf(o)
	var live *unstructured.Unstructured
	err = d.retry(ctx, func(ctx context.Context) error {
		var err error
		live, err = ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return &ObjectDrift{Object: ref, Missing: true}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the live object: %w", err)
	}
	var want *unstructured.Unstructured
	err = d.retry(ctx, func(ctx context.Context) error {
		var err error
		want, err = ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dry-run apply: %w", describeApplyError(err))
	}
	ignore = append(slices.Clone(ignore), "/metadata/annotations/"+escapePointer(AnnotationDigest))
	var fields []FieldDrift
	diffValues("", comparable(live.Object), comparable(want.Object), ignore, &fields)
	if len(fields) == 0 {
		return nil, nil
	}
	secret := ref.Group == "" && ref.Kind == "Secret"
	for i := range fields {
		fields[i].ChangedBy = ownersOf(live.GetManagedFields(), fields[i].Path)
		if secret && !strings.HasPrefix(fields[i].Path, "/metadata/") {
			fields[i].Live, fields[i].Desired, fields[i].Redacted = nil, nil, true
		}
	}
	return &ObjectDrift{Object: ref, Fields: fields}, nil
}

// comparable drops what the server maintains, so that only content is compared.
func comparable(obj map[string]any) map[string]any {
	c := runtime.DeepCopyJSON(obj)
	delete(c, "status")
	if m, ok := c["metadata"].(map[string]any); ok {
		for _, k := range []string{"resourceVersion", "generation", "managedFields", "creationTimestamp", "uid", "selfLink"} {
			delete(m, k)
		}
	}
	return c
}

// diffValues appends the JSON pointers at which live and want differ: maps key by
// key, lists of equal length item by item, anything else whole.
func diffValues(path string, live, want any, ignore []string, out *[]FieldDrift) {
	if ignored(path, ignore) {
		return
	}
	lm, lok := live.(map[string]any)
	wm, wok := want.(map[string]any)
	if lok && wok {
		keys := map[string]bool{}
		for k := range lm {
			keys[k] = true
		}
		for k := range wm {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			diffValues(path+"/"+escapePointer(k), lm[k], wm[k], ignore, out)
		}
		return
	}
	ll, lok := live.([]any)
	wl, wok := want.([]any)
	if lok && wok && len(ll) == len(wl) {
		for i := range ll {
			diffValues(path+"/"+strconv.Itoa(i), ll[i], wl[i], ignore, out)
		}
		return
	}
	if !reflect.DeepEqual(live, want) {
		*out = append(*out, FieldDrift{Path: path, Live: live, Desired: want})
	}
}

// ownersOf names the field managers other than kubeplug whose managed fields
// contain the field at path. It follows map keys only: below a list item (whose
// managed-fields key is its merge key, not its index) the owner of the list item is
// reported.
func ownersOf(entries []metav1.ManagedFieldsEntry, path string) []string {
	tokens := strings.Split(strings.TrimPrefix(path, "/"), "/")
	var out []string
	for _, e := range entries {
		if e.Manager == FieldManager || e.FieldsV1 == nil || slices.Contains(out, e.Manager) {
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
