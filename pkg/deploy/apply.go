package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/internal/faultpoint"
)

// UnitError is one plugin's failure in a wave.
type UnitError struct {
	Plugin string
	// Object is the object that failed, when one did.
	Object string
	Err    error
}

func (e *UnitError) Error() string {
	if e.Object != "" {
		return fmt.Sprintf("plugin %s: %s: %v", e.Plugin, e.Object, e.Err)
	}
	return fmt.Sprintf("plugin %s: %v", e.Plugin, e.Err)
}

func (e *UnitError) Unwrap() error { return e.Err }

// WaveResult is what applying one wave did.
type WaveResult struct {
	Applied, Pruned int
}

// ApplyWave applies the units of one wave, waits until each is ready, prunes what
// their previous versions had that they no longer produce, and records their
// inventories. Every unit is attempted; the error joins one *UnitError per failed unit.
func (d *Deployer) ApplyWave(ctx context.Context, wave int, units []Unit) (*WaveResult, error) {
	res := &WaveResult{}
	total := 0
	for _, u := range units {
		total += len(u.Objects)
	}
	d.emit(Event{Type: WaveStarted, Wave: wave, Total: total, Message: fmt.Sprintf("%d plugin(s)", len(units))})
	faultpoint.Hit("apply:wave-start")
	if !d.opts.DryRun {
		if err := d.ensureNamespace(ctx); err != nil {
			return nil, err
		}
	}
	type state struct {
		unit    Unit
		health  health
		old     *Record   // the plugin's newest revision before this run
		hist    []*Record // all its revisions, oldest first
		rec     *Record   // the revision this run records
		same    bool      // nothing changed: rec is old, written only if the result differs
		applied []*unstructured.Unstructured
		err     error
	}
	states := make([]*state, len(units))
	// Objects the cluster already holds as desired need no request: on a re-apply
	// with nothing changed, one LIST per kind replaces a thousand applies.
	skip := make([]map[string]*unstructured.Unstructured, len(states))
	// Each unit's preparation (its inventory, its live objects) is independent of the
	// others', so a wide wave does them concurrently.
	var prep sync.WaitGroup
	for i, u := range units {
		s := &state{unit: u}
		states[i] = s
		prep.Go(func() {
			if s.health, s.err = compileHealth(u.Health); s.err != nil {
				return
			}
			if s.err = d.checkCRDs(ctx, u.Plugin, u.Objects); s.err != nil {
				return
			}
			for _, o := range u.Objects {
				d.prepareObject(o, u.Plugin)
			}
			s.old, s.hist, s.err = d.latest(ctx, u.Plugin)
		})
	}
	prep.Wait()
	// A refused downgrade stops the whole wave before anything is changed.
	var refused []error
	for _, s := range states {
		if s.err == nil && s.unit.rollback == nil {
			if err := d.downgrade(s.old, s.unit.Plugin, s.unit.Version); err != nil {
				refused = append(refused, &UnitError{Plugin: s.unit.Plugin, Err: err})
			}
		}
	}
	if len(refused) > 0 {
		return res, errors.Join(refused...)
	}
	if !d.opts.DryRun {
		for i, s := range states {
			if s.err != nil {
				continue
			}
			prep.Go(func() {
				// Record first: if this run dies, the newest revision covers every
				// object the plugin may own, old or new, and holds what it applies.
				if s.rec, s.same, s.err = d.begin(ctx, s.unit, s.old); s.err != nil {
					return
				}
				faultpoint.Hit("apply:recorded")
				skip[i] = d.liveObjects(ctx, s.unit.Plugin, s.unit.Objects)
			})
		}
		prep.Wait()
	}
	// Definitions first: CRDs and Namespaces of every unit, then wait for the CRDs.
	for pass := range 2 {
		var jobs []applyJob
		for i, s := range states {
			if s.err != nil {
				continue
			}
			for _, o := range s.unit.Objects {
				if isDefinition(o) != (pass == 0) {
					continue
				}
				live, ignore := skip[i][refOf(o).key()], ignoredPaths(s.unit.DriftIgnore, o)
				if unchanged(o, live, ignore) {
					s.applied = append(s.applied, live)
					continue
				}
				jobs = append(jobs, applyJob{unit: i, obj: yieldIgnored(o, live, ignore)})
			}
		}
		out := d.applyAll(ctx, jobs)
		for j, r := range out {
			s := states[jobs[j].unit]
			if r.err != nil {
				if s.err == nil {
					s.err = &UnitError{Plugin: s.unit.Plugin, Object: refOf(jobs[j].obj).String(), Err: r.err}
				}
				continue
			}
			s.applied = append(s.applied, r.obj)
		}
		if pass == 0 && !d.opts.DryRun {
			for _, s := range states {
				if s.err != nil {
					continue
				}
				if err := d.waitEstablished(ctx, s.applied); err != nil {
					s.err = &UnitError{Plugin: s.unit.Plugin, Err: err}
				}
			}
			d.mapper.Reset()
			faultpoint.Hit("apply:definitions-ready")
		}
	}
	for _, s := range states {
		if s.err == nil {
			res.Applied += len(s.applied)
			d.emit(Event{Type: PluginApplied, Wave: wave, Plugin: s.unit.Plugin, Applied: len(s.applied), Total: len(s.unit.Objects)})
		}
	}
	if d.opts.DryRun {
		for _, s := range states {
			for _, h := range s.unit.Releases {
				if s.err != nil {
					break
				}
				if _, err := d.installRelease(ctx, s.unit.Plugin, h); err != nil {
					s.err = &UnitError{Plugin: s.unit.Plugin, Err: err}
				}
			}
		}
		return res, joinStates(states, func(s *state) (string, error) { return s.unit.Plugin, s.err })
	}
	// Readiness, prune and the narrowed inventory, plugin by plugin in parallel.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, s := range states {
		if s.err != nil {
			d.emit(Event{Type: PluginFailed, Wave: wave, Plugin: s.unit.Plugin, Message: s.err.Error()})
			continue
		}
		wg.Go(func() {
			var relObjs *releaseObjs
			var err error
			faultpoint.Hit("apply:before-releases")
			if s.unit.rollback != nil {
				relObjs, err = d.restoreReleases(ctx, s.unit)
			} else {
				relObjs, err = d.releases(ctx, s.unit)
			}
			if err == nil {
				err = d.waitReady(ctx, wave, s.unit.Plugin, append(slices.Clone(s.applied), relObjs.objects...), len(s.applied), s.health)
				if err != nil {
					err = d.releasesFailed(ctx, relObjs.done, err)
				}
			}
			if err != nil {
				s.err = &UnitError{Plugin: s.unit.Plugin, Err: err}
				d.emit(Event{Type: PluginFailed, Wave: wave, Plugin: s.unit.Plugin, Message: err.Error()})
				return
			}
			all := append(refsOf(s.unit.Objects), refsOf(relObjs.objects)...)
			d.emit(Event{Type: PluginReady, Wave: wave, Plugin: s.unit.Plugin, Ready: len(all), Total: len(all)})
			faultpoint.Hit("apply:before-prune")
			for _, r := range minusReleases(s.old.releases(), unitReleases(s.unit)) {
				if err := d.uninstallRelease(ctx, r); err != nil {
					s.err = &UnitError{Plugin: s.unit.Plugin, Err: fmt.Errorf("prune: %w", err)}
					return
				}
			}
			stale := minus(s.old.refs(), all)
			if n, err := d.deleteAll(ctx, stale); err != nil {
				s.err = &UnitError{Plugin: s.unit.Plugin, Err: fmt.Errorf("prune: %w", err)}
				return
			} else if n > 0 {
				mu.Lock()
				res.Pruned += n
				mu.Unlock()
				d.emit(Event{Type: PluginPruned, Wave: wave, Plugin: s.unit.Plugin, Total: n})
			}
			faultpoint.Hit("apply:before-finish")
			if err := d.finish(ctx, s.unit, s.rec, s.same, all, relObjs.done); err != nil {
				s.err = &UnitError{Plugin: s.unit.Plugin, Err: err}
			}
		})
	}
	wg.Wait()
	for _, s := range states {
		if s.err != nil && s.rec != nil {
			// Keep the widened inventory, but say the plugin failed; with
			// RollbackOnFailure, restore its previous revision.
			var ue *UnitError
			if errors.As(s.err, &ue) {
				ue.Err = d.failed(ctx, wave, s.unit, s.hist, s.rec, s.same, ue.Err, s.err.Error())
			} else {
				s.err = d.failed(ctx, wave, s.unit, s.hist, s.rec, s.same, s.err, s.err.Error())
			}
		}
	}
	faultpoint.Hit("apply:wave-end")
	d.emit(Event{Type: WaveFinished, Wave: wave, Applied: res.Applied, Total: total})
	return res, joinStates(states, func(s *state) (string, error) { return s.unit.Plugin, s.err })
}

func joinStates[S any](states []S, f func(S) (string, error)) error {
	var errs []error
	for _, s := range states {
		name, err := f(s)
		if err == nil {
			continue
		}
		var ue *UnitError
		if !errors.As(err, &ue) {
			err = &UnitError{Plugin: name, Err: err}
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func isDefinition(o *unstructured.Unstructured) bool {
	gk := o.GroupVersionKind().GroupKind()
	return gk.Kind == "Namespace" && gk.Group == "" || gk.Kind == "CustomResourceDefinition" && gk.Group == "apiextensions.k8s.io"
}

type applyJob struct {
	unit int
	obj  *unstructured.Unstructured
}

type applyResult struct {
	obj *unstructured.Unstructured
	err error
}

// applyAll applies objects concurrently, bounded by Options.Concurrency.
func (d *Deployer) applyAll(ctx context.Context, jobs []applyJob) []applyResult {
	out := make([]applyResult, len(jobs))
	sem := make(chan struct{}, d.opts.Concurrency)
	var wg sync.WaitGroup
	for i, j := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i].obj, out[i].err = d.apply(ctx, j.obj)
			if out[i].err == nil {
				faultpoint.Hit("apply:object-applied")
			}
		})
	}
	wg.Wait()
	return out
}

// apply server-side applies one object and returns what the server stored.
func (d *Deployer) apply(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := d.mapping(o)
	if err != nil {
		return nil, err
	}
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: d.opts.ForceConflicts}
	if d.opts.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var got *unstructured.Unstructured
	err = d.retry(ctx, func(ctx context.Context) error {
		var err error
		got, err = ri.Apply(ctx, o.GetName(), o, opts)
		return err
	})
	if err != nil {
		return nil, describeApplyError(err)
	}
	return got, nil
}

// describeApplyError keeps the API server's own words, which name the field and,
// for a conflict, the field manager that owns it.
func describeApplyError(err error) error {
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

// deleteAll deletes objects, namespaced ones and other kinds first, then CRDs and
// Namespaces, and returns how many existed.
func (d *Deployer) deleteAll(ctx context.Context, refs []ObjRef) (int, error) {
	var first, last []ObjRef
	for _, r := range refs {
		if (r.Kind == "Namespace" && r.Group == "") || (r.Kind == "CustomResourceDefinition" && r.Group == "apiextensions.k8s.io") {
			last = append(last, r)
		} else {
			first = append(first, r)
		}
	}
	n := 0
	var errs []error
	for _, batch := range [][]ObjRef{first, last} {
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, d.opts.Concurrency)
		for _, r := range batch {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				existed, err := d.delete(ctx, r)
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

func (d *Deployer) delete(ctx context.Context, r ObjRef) (bool, error) {
	ri, err := d.resourceFor(r)
	if err != nil {
		if strings.Contains(err.Error(), "serves no") {
			return false, nil // its CRD is gone, and the object with it
		}
		return false, err
	}
	policy := metav1.DeletePropagationBackground
	err = d.retry(ctx, func(ctx context.Context) error {
		return ri.Delete(ctx, r.Name, metav1.DeleteOptions{PropagationPolicy: &policy})
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// releaseObjs is what installing a unit's Helm releases did.
type releaseObjs struct {
	done    []*releaseDone
	objects []*unstructured.Unstructured
}

// releases installs or upgrades a unit's Helm releases in order and returns the
// objects of their manifests. When one fails, those already changed are reverted if
// Options.RollbackOnFailure says so.
func (d *Deployer) releases(ctx context.Context, u Unit) (*releaseObjs, error) {
	return d.eachRelease(ctx, len(u.Releases), func(i int) (*releaseDone, error) {
		return d.installRelease(ctx, u.Plugin, u.Releases[i])
	})
}

// eachRelease brings n releases to their state one after the other with do and
// collects their manifests' objects; when one fails, those already changed are
// reverted if Options.RollbackOnFailure says so.
func (d *Deployer) eachRelease(ctx context.Context, n int, do func(i int) (*releaseDone, error)) (*releaseObjs, error) {
	out := &releaseObjs{}
	for i := range n {
		done, err := do(i)
		if done != nil {
			out.done = append(out.done, done)
		}
		if err != nil {
			return nil, d.releasesFailed(ctx, out.done, err)
		}
		objs, err := d.releaseObjects(done.rel)
		if err != nil {
			return nil, d.releasesFailed(ctx, out.done, err)
		}
		out.objects = append(out.objects, objs...)
	}
	return out, nil
}

// releasesFailed reverts (with RollbackOnFailure) or marks failed the releases that
// changed, after cause, and returns cause with what the rollback did.
func (d *Deployer) releasesFailed(ctx context.Context, done []*releaseDone, cause error) error {
	var errs []error
	rolled := 0
	for i := len(done) - 1; i >= 0; i-- {
		r := done[i]
		if !r.changed {
			continue
		}
		if !d.opts.RollbackOnFailure {
			d.failRelease(r, cause)
			continue
		}
		// Roll back even when ctx is done: a half-upgraded release is worse.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.Timeout)
		err := d.undoRelease(rctx, r)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rolled++
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w; rollback failed: %w", cause, errors.Join(errs...))
	}
	if rolled > 0 {
		return fmt.Errorf("%w (rolled back %d Helm release(s))", cause, rolled)
	}
	return cause
}

func minusReleases(a, b []ReleaseRef) []ReleaseRef {
	var out []ReleaseRef
	for _, r := range a {
		if !slices.Contains(b, r) {
			out = append(out, r)
		}
	}
	return out
}
