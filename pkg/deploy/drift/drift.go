package drift

import (
	"context"
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

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/ssa"
)

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
	Object kube.ObjRef `json:"object"`
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

// Plugin is one plugin's desired objects, as an apply would make them.
type Plugin struct {
	Name    string
	Objects []*unstructured.Unstructured
	// Ignore names fields others may change: not drift.
	Ignore []ssa.Ignore
}

// Detector compares plugins' desired objects with the cluster.
type Detector struct {
	c           *kube.Client
	a           *ssa.Applier
	concurrency int
}

// New returns a Detector for the cluster c talks to, preparing objects as a does
// and making at most concurrency requests at once.
func New(c *kube.Client, a *ssa.Applier, concurrency int) *Detector {
	return &Detector{c: c, a: a, concurrency: max(concurrency, 1)}
}

// Detect compares each plugin's desired objects with the cluster: for every object it
// asks the API server what a forced server-side apply would store (a dry run, so
// nothing changes) and reports the fields where that differs from the live object —
// someone changed a field kubeplug applies since kubeplug applied it — and the
// objects that are missing. Metadata the server maintains (resourceVersion,
// generation, managedFields, timestamps), status, what earlier kubeplugs put on
// every object (legacyMetadata, which the next apply removes) and the unit's
// DriftIgnore paths are not drift. Helm releases' objects are not
// compared. The result has one entry per unit, in the units' order; the error
// joins one *UnitError per object that could not be compared.
func (d *Detector) Detect(ctx context.Context, units []Plugin) ([]PluginDrift, error) {
	out := make([]PluginDrift, len(units))
	type job struct {
		unit int
		obj  *unstructured.Unstructured
	}
	var jobs []job
	for i, u := range units {
		out[i] = PluginDrift{Plugin: u.Name, Checked: len(u.Objects)}
		for _, o := range u.Objects {
			o = o.DeepCopy()
			d.a.Prepare(o, u.Name)
			jobs = append(jobs, job{unit: i, obj: o})
		}
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, d.concurrency)
	for _, j := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			u := units[j.unit]
			od, err := d.objectDrift(ctx, j.obj, ssa.IgnoredPaths(u.Ignore, j.obj))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, &kube.UnitError{Plugin: u.Name, Object: kube.RefOf(j.obj).String(), Err: err})
				return
			}
			if od != nil {
				out[j.unit].Objects = append(out[j.unit].Objects, *od)
			}
		})
	}
	wg.Wait()
	for i := range out {
		slices.SortFunc(out[i].Objects, func(a, b ObjectDrift) int { return strings.Compare(a.Object.Key(), b.Object.Key()) })
	}
	return out, errors.Join(errs...)
}

// objectDrift compares one object; nil means no drift.
func (d *Detector) objectDrift(ctx context.Context, o *unstructured.Unstructured, ignore []string) (*ObjectDrift, error) {
	ri, err := d.c.Resource(o)
	if err != nil {
		if errors.Is(err, kube.ErrNoKind) {
			return &ObjectDrift{Object: kube.RefOf(o), Missing: true}, nil // its CRD is not there either
		}
		return nil, err
	}
	ref := kube.RefOf(o)
	var live *unstructured.Unstructured
	err = d.c.Retry(ctx, func(ctx context.Context) error {
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
	err = d.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		want, err = ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: kube.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dry-run apply: %w", ssa.DescribeApplyError(err))
	}
	var fields []FieldDrift
	diffValues("", withoutLegacy(comparable(live.Object), want), comparable(want.Object), ignore, &fields)
	if len(fields) == 0 {
		return nil, nil
	}
	secret := ref.Group == "" && ref.Kind == "Secret"
	for i := range fields {
		fields[i].ChangedBy = ssa.OwnersOf(live.GetManagedFields(), fields[i].Path)
		if secret && !strings.HasPrefix(fields[i].Path, "/metadata/") {
			fields[i].Live, fields[i].Desired, fields[i].Redacted = nil, nil, true
		}
	}
	return &ObjectDrift{Object: ref, Fields: fields}, nil
}

// withoutLegacy drops from obj, a live object's comparable copy, what earlier
// kubeplugs put on every object they applied and kubeplug no longer sends,
// where want (the apply's dry run, which drops it) does not have it: their
// digest annotation (ssa.AnnotationDigest) and their app.kubernetes.io/managed-by
// label. Not drift of the plugin's content: the object's next apply removes
// them.
func withoutLegacy(obj map[string]any, want *unstructured.Unstructured) map[string]any {
	m, ok := obj["metadata"].(map[string]any)
	if !ok {
		return obj
	}
	drop := func(field, key string, only func(any) bool) {
		kv, ok := m[field].(map[string]any)
		if !ok {
			return
		}
		if _, wanted := want.GetAnnotations()[key]; field == "annotations" && wanted {
			return
		}
		if _, wanted := want.GetLabels()[key]; field == "labels" && wanted {
			return
		}
		if v, ok := kv[key]; !ok || only != nil && !only(v) {
			return
		}
		delete(kv, key)
		if len(kv) == 0 {
			delete(m, field)
		}
	}
	drop("annotations", ssa.AnnotationDigest, nil)
	drop("labels", kube.LabelManagedBy, func(v any) bool { return v == kube.FieldManager })
	return obj
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
	if ssa.Ignored(path, ignore) {
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
			diffValues(path+"/"+ssa.EscapePointer(k), lm[k], wm[k], ignore, out)
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
