package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/internal/faultpoint"
	"github.com/kubeplug/kubeplug/pkg/deploy/crd"
	"github.com/kubeplug/kubeplug/pkg/deploy/helm"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/ssa"
	"github.com/kubeplug/kubeplug/pkg/serving"
)

// WaveResult is what applying one wave did.
type WaveResult struct {
	Applied, Pruned int
}

// ApplyWave applies the units of one wave, waits until each is ready, prunes what
// their previous versions had that they no longer produce, and records their
// inventories. Every unit is attempted; the error joins one *UnitError per failed unit.
//
// The work is a wave's phases, in order (see wave): prepare (health checks, CRD
// safety, the records read), refuse downgrades, begin the records, apply stage by
// stage as ssa.Order says, then per plugin settle (Helm releases, wait, prune,
// finish the record), and record the failures.
func (d *Deployer) ApplyWave(ctx context.Context, n int, units []Unit) (*WaveResult, error) {
	w := d.newWave(n, units)
	d.StartWave(n, len(units), w.total)
	faultpoint.Hit("apply:wave-start")
	err := w.run(ctx)
	if w.settled {
		faultpoint.Hit("apply:wave-end")
		d.FinishWave(n, w.res.Applied, w.total)
	}
	return w.res, err
}

// ApplyUnit applies one unit as a wave of one (ApplyWave's phases), for a caller
// that starts each plugin on its own as soon as the plugins it waits for are
// ready, rather than a wave at a time: BeginUnit, then Begun.Apply.
func (d *Deployer) ApplyUnit(ctx context.Context, n int, u Unit, ready func()) (*WaveResult, error) {
	return d.BeginUnit(ctx, n, u).Apply(ctx, ready)
}

// Begun is one unit of ApplyUnit's, begun (BeginUnit) and not applied yet. It
// must be applied or abandoned, once.
type Begun struct {
	w *wave
	// early: BeginUnit did the first phases, which stopped with err; else Apply
	// does every phase.
	early bool
	err   error
}

// BeginUnit does what can be done of applying u before the plugins it waits for
// are ready, so that none of it is in the way once they are: it prepares the
// unit (health checks, CRD safety, its objects and their digests prepared, its records read),
// refuses a downgrade and records the revision, Applying, with its inventory
// widened — everything but changing the cluster's objects. n is the unit's wave
// in the plan, for its events. When a kind of u's objects is not served yet (its
// CRD comes with a plugin u waits for), or in a dry run, BeginUnit does nothing
// and Apply does it all: an object's namespace and digest depend on its kind's
// scope. What fails here is returned by Apply.
func (d *Deployer) BeginUnit(ctx context.Context, n int, u Unit) *Begun {
	b := &Begun{w: d.newWave(n, []Unit{u})}
	if d.opts.DryRun || !d.mapsAll(u.Objects) {
		return b
	}
	b.early = true
	faultpoint.Hit("apply:wave-start")
	b.err = b.w.start(ctx)
	return b
}

// Apply applies the begun unit, waits until it is ready, prunes what its previous
// version had that it no longer produces and records its inventory, as ApplyWave
// does for a wave of one. ready, when not nil, is called once the unit's objects
// are ready, before its prune and record are finished, so that the plugins
// waiting for this one need not wait for its bookkeeping too; in a dry run,
// which waits for nothing, once its objects were applied. ready is not called
// for a unit that fails first.
//
// Apply emits no wave events: the caller, which knows which units make up a
// wave, does (StartWave, FinishWave). Units applied at once share the
// Deployer's Options.Concurrency.
func (b *Begun) Apply(ctx context.Context, ready func()) (*WaveResult, error) {
	w := b.w
	w.onReady = ready
	if !b.early {
		faultpoint.Hit("apply:wave-start")
		b.err = w.start(ctx)
	}
	if b.err != nil {
		return w.res, b.err
	}
	err := w.finish(ctx)
	if w.settled {
		faultpoint.Hit("apply:wave-end")
	}
	return w.res, err
}

// Abandon ends a begun unit that is not to be applied (a plugin it waits for
// failed, the run was cancelled): the revision BeginUnit recorded is marked
// Interrupted with why, so that the next run continues it; a plugin that was not
// installed has its record removed instead, as nothing of it was applied. It
// writes even when ctx is done: a record that says Applying lies.
func (b *Begun) Abandon(ctx context.Context, why string) error {
	r := b.w.runs[0]
	if !b.early || r.rec == nil || r.same {
		return nil // nothing was recorded
	}
	ctx = context.WithoutCancel(ctx)
	if r.old == nil {
		return b.w.d.store.Delete(ctx, r.unit.Plugin)
	}
	return b.w.d.setPhase(ctx, r.rec.Clone(), PhaseInterrupted, why+"; run the same command again to continue")
}

// mapsAll reports whether the cluster serves the kind of every object, as far
// as the Deployer's discovery knows, without asking again.
func (d *Deployer) mapsAll(objs []*unstructured.Unstructured) bool {
	for _, o := range objs {
		if !d.kc.Maps(o.GroupVersionKind()) {
			return false
		}
	}
	return true
}

// StartWave says that wave n starts, with so many plugins and objects: the
// WaveStarted event, for a caller of ApplyUnit (ApplyWave emits its own).
func (d *Deployer) StartWave(n, plugins, total int) {
	d.emit(Event{Type: WaveStarted, Wave: n, Total: total, Message: fmt.Sprintf("%d plugin(s)", plugins)})
}

// FinishWave says that every unit of wave n has ended, having applied so many
// of its total objects: the WaveFinished event, for a caller of ApplyUnit.
func (d *Deployer) FinishWave(n, applied, total int) {
	d.emit(Event{Type: WaveFinished, Wave: n, Applied: applied, Total: total})
}

// run is a wave's phases, in order: start, then finish.
func (w *wave) run(ctx context.Context) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	return w.finish(ctx)
}

// start is the phases that change none of the cluster's objects: the records'
// namespace, prepare, refuse downgrades, begin the records. It returns an error
// when the wave stops before anything is changed (no records namespace, a
// refused downgrade).
func (w *wave) start(ctx context.Context) error {
	d := w.d
	if !d.opts.DryRun && !d.nsReady.Load() {
		if err := d.ensureNamespace(ctx); err != nil {
			return err
		}
	}
	w.prepare(ctx)
	if err := w.refuseDowngrades(); err != nil {
		return err
	}
	if !d.opts.DryRun {
		w.begin(ctx)
	}
	return nil
}

// ensureNamespace creates the records' namespace once per Deployer, whatever
// number of units begin at once.
func (d *Deployer) ensureNamespace(ctx context.Context) error {
	d.nsMu.Lock()
	defer d.nsMu.Unlock()
	if d.nsReady.Load() {
		return nil
	}
	if err := d.kc.EnsureNamespace(ctx, d.opts.Namespace); err != nil {
		return err
	}
	d.nsReady.Store(true)
	return nil
}

// finish is the phases that apply: inject, apply stage by stage, then settle
// and record the failures (a dry run only has the API server check the Helm
// releases). settled is set when it went through them all, not in a dry run.
func (w *wave) finish(ctx context.Context) error {
	d := w.d
	w.inject(ctx)
	for _, stage := range ssa.Stages {
		// What routes the API server's requests to a plugin (APIServices, webhook
		// configurations) waits until the plugin's other objects are ready (settle):
		// a server that is not there yet would fail the requests routed to it.
		if stage != ssa.StageServing || d.opts.DryRun {
			w.applyStage(ctx, stage)
		}
	}
	w.applied()
	if d.opts.DryRun {
		w.dryRunReleases(ctx)
		if w.onReady != nil && w.runs[0].err == nil {
			w.onReady()
		}
		return w.err()
	}
	w.settle(ctx)
	w.recordFailures(ctx)
	w.settled = true
	return w.err()
}

// wave is one wave's work: its units, what each has reached, and the result.
// Phases fill unitRun fields in order; a unit whose err is set takes no further
// part, except in recordFailures.
type wave struct {
	d     *Deployer
	n     int
	runs  []*unitRun
	total int
	res   *WaveResult
	mu    sync.Mutex // guards res once units settle in parallel
	// onReady, set by ApplyUnit, is called when its one unit is ready.
	onReady func()
	// settled: the wave went through all its phases (finish).
	settled bool
}

// unitRun is one unit's progress through a wave.
type unitRun struct {
	unit   Unit
	health ssa.Health
	// digests are the digests of the unit's objects' content (ssa.Digest), by
	// index into unit.Objects: what the record keeps for each once applied.
	digests []string
	old     *Record   // the plugin's newest revision before this run
	hist    []*Record // all its revisions, oldest first
	rec     *Record   // the revision this run records
	same    bool      // nothing changed: rec is old, written only if the result differs
	// live is what the cluster already holds of the unit's objects, by ObjRef key:
	// objects it holds as desired need no request (one LIST per kind replaces a
	// thousand applies on a re-apply with nothing changed).
	live map[string]*unstructured.Unstructured
	// current are the unit's objects still as its record says they were last
	// applied and ready (ssa.Live.Current), by ObjRef key, with their
	// resourceVersions: not read, applied or waited for; kept counts those
	// reached so far.
	current map[string]string
	kept    int
	applied []*unstructured.Unstructured
	// filled are the unit's objects with their serving certificates and CA
	// bundles filled in (serving.Inject), by index into unit.Objects: applied in
	// their place, never recorded.
	filled map[int]*unstructured.Unstructured
	// helm is what the unit's Helm releases did (settle).
	helm *helm.Result
	err  error
}

func (d *Deployer) newWave(n int, units []Unit) *wave {
	w := &wave{d: d, n: n, res: &WaveResult{}}
	for _, u := range units {
		w.total += len(u.Objects)
		w.runs = append(w.runs, &unitRun{unit: u})
	}
	return w
}

// each runs fn for every unit still in the wave, concurrently, and waits.
func (w *wave) each(fn func(r *unitRun)) {
	var wg sync.WaitGroup
	for _, r := range w.runs {
		if r.err == nil {
			wg.Go(func() { fn(r) })
		}
	}
	wg.Wait()
}

// prepare compiles each unit's health checks, refuses unsafe CRD changes,
// prepares its objects (label, namespace) and their digests, and reads its
// records. Units are
// independent, so a wide wave does them concurrently.
func (w *wave) prepare(ctx context.Context) {
	w.each(func(r *unitRun) {
		u := r.unit
		if r.health, r.err = ssa.CompileChecks(u.Health); r.err != nil {
			return
		}
		if !w.d.opts.ForceCRDChanges {
			if r.err = crd.Check(ctx, w.d.kc, u.Plugin, u.Objects); r.err != nil {
				return
			}
		}
		r.digests = make([]string, len(u.Objects))
		for i, o := range u.Objects {
			r.digests[i] = w.d.ssa.Prepare(o, u.Plugin)
		}
		r.old, r.hist, r.err = w.d.history(ctx, u.Plugin)
	})
}

// refuseDowngrades stops the whole wave before anything is changed when a unit
// would downgrade its plugin and nothing allows it.
func (w *wave) refuseDowngrades() error {
	var refused []error
	for _, r := range w.runs {
		if r.err == nil && r.unit.rollback == nil {
			if err := w.d.downgrade(r.old, r.unit.Plugin, r.unit.Version); err != nil {
				refused = append(refused, &UnitError{Plugin: r.unit.Plugin, Err: err})
			}
		}
	}
	return errors.Join(refused...)
}

// begin records each unit's revision before anything is applied — if this run
// dies, the newest revision covers every object the plugin may own, old or new,
// and holds what it applies — and lists what the cluster holds of its objects.
func (w *wave) begin(ctx context.Context) {
	w.each(func(r *unitRun) {
		if r.err = w.beginRecord(ctx, r); r.err != nil {
			return
		}
		faultpoint.Hit("apply:recorded")
		if r.old != nil {
			// A plugin installed for the first time has nothing live to compare.
			live := w.d.ssa.LiveObjects(ctx, r.unit.Plugin, r.unit.Objects, trustedVersions(r, r.old))
			r.live, r.current = live.Objects, live.Current
		}
	})
}

// applyJob is one object to apply for one unit.
type applyJob struct {
	run *unitRun
	obj *unstructured.Unstructured
}

// applyStage applies every unit's objects of one stage (ssa.Order), concurrently
// across units; objects the cluster holds as desired are not sent. After the
// definitions, it waits until the CRDs are established, so that the next stages'
// custom resources can be mapped and applied.
func (w *wave) applyStage(ctx context.Context, stage ssa.Stage) {
	var jobs []applyJob
	for _, r := range w.runs {
		if r.err == nil {
			jobs = append(jobs, w.stageJobs(r, stage)...)
		}
	}
	w.applyJobs(ctx, jobs)
	definitions := false // did this stage change a kind the server serves?
	for _, j := range jobs {
		definitions = definitions || ssa.RuleFor(j.obj.GroupVersionKind().GroupKind()).Established
	}
	if stage == ssa.StageDefinitions && !w.d.opts.DryRun {
		for _, r := range w.runs {
			if r.err != nil {
				continue
			}
			if err := w.d.ssa.WaitEstablished(ctx, r.applied); err != nil {
				r.err = &UnitError{Plugin: r.unit.Plugin, Err: err}
			}
		}
		if definitions {
			w.d.kc.ResetMappings()
		}
		faultpoint.Hit("apply:definitions-ready")
	}
}

// stageJobs are the objects of r's unit in stage that the cluster does not
// already hold as desired; those it holds are counted as applied.
func (w *wave) stageJobs(r *unitRun, stage ssa.Stage) []applyJob {
	var jobs []applyJob
	for i, o := range r.unit.Objects {
		if ssa.StageOf(o.GroupVersionKind().GroupKind()) != stage {
			continue
		}
		if f, ok := r.filled[i]; ok {
			o = f
		}
		key := kube.RefOf(o).Key()
		if _, ok := r.current[key]; ok {
			r.kept++
			continue
		}
		live, ignore := r.live[key], ssa.IgnoredPaths(r.unit.DriftIgnore, o)
		if ssa.Unchanged(o, live, r.digests[i], r.old.Digest(key), ignore) {
			r.applied = append(r.applied, live)
			continue
		}
		jobs = append(jobs, applyJob{run: r, obj: ssa.YieldIgnored(o, live, ignore)})
	}
	return jobs
}

// applyJobs applies jobs concurrently and adds what the server stored to each
// unit's applied objects; the first failure of a unit is its error.
func (w *wave) applyJobs(ctx context.Context, jobs []applyJob) {
	objs := make([]*unstructured.Unstructured, len(jobs))
	for i, j := range jobs {
		objs[i] = j.obj
	}
	// The server's answer is read whole only where something reads more of it
	// than its resourceVersion: a kind with a status (readiness), one the
	// unit's health checks look at, a dry run's answer.
	metadataOnly := map[*unstructured.Unstructured]bool{}
	for _, j := range jobs {
		if !w.d.opts.DryRun && ssa.StatusFree(j.obj.GroupVersionKind().GroupKind()) && versionable(j.run.unit, j.obj) {
			metadataOnly[j.obj] = true
		}
	}
	priority := 0 // of the units whose objects these are: a wave's, or ApplyUnit's one
	for i, j := range jobs {
		if i == 0 || j.run.unit.Priority > priority {
			priority = j.run.unit.Priority
		}
	}
	for i, res := range w.d.ssa.ApplyAll(ctx, objs, priority, func(o *unstructured.Unstructured) bool { return metadataOnly[o] }) {
		r := jobs[i].run
		if res.Err != nil {
			if r.err == nil {
				r.err = &UnitError{Plugin: r.unit.Plugin, Object: kube.RefOf(jobs[i].obj).String(), Err: res.Err}
			}
			continue
		}
		r.applied = append(r.applied, res.Obj)
	}
}

// inject fills in each unit's serving certificates and CA bundles
// (serving.Inject) from the live Secrets, before anything is applied.
func (w *wave) inject(ctx context.Context) {
	w.each(func(r *unitRun) {
		if err := w.d.refuseTakenGroups(ctx, r.unit); err != nil {
			r.err = &UnitError{Plugin: r.unit.Plugin, Err: err}
			return
		}
		var err error
		if r.filled, err = serving.Inject(ctx, r.unit.Objects, w.d.liveSecret, w.d.opts.ServingCerts); err != nil {
			r.err = &UnitError{Plugin: r.unit.Plugin, Err: err}
		}
	})
}

// applied reports each unit whose objects were all applied.
func (w *wave) applied() {
	for _, r := range w.runs {
		if r.err == nil {
			w.res.Applied += len(r.applied) + r.kept
			w.d.emit(Event{Type: PluginApplied, Wave: w.n, Plugin: r.unit.Plugin, Applied: len(r.applied) + r.kept, Total: len(r.unit.Objects)})
		}
	}
}

// dryRunReleases has the API server validate each unit's Helm releases.
func (w *wave) dryRunReleases(ctx context.Context) {
	for _, r := range w.runs {
		for _, h := range r.unit.Releases {
			if r.err != nil {
				break
			}
			if _, err := w.d.helm.Install(ctx, r.unit.Plugin, h); err != nil {
				r.err = &UnitError{Plugin: r.unit.Plugin, Err: err}
			}
		}
	}
}

// settle brings every applied unit to its end, plugin by plugin in parallel: its
// Helm releases, readiness, the prune and the narrowed record.
func (w *wave) settle(ctx context.Context) {
	for _, r := range w.runs {
		if r.err != nil {
			w.d.emit(Event{Type: PluginFailed, Wave: w.n, Plugin: r.unit.Plugin, Message: r.err.Error()})
		}
	}
	var mu sync.Mutex
	w.each(func(r *unitRun) {
		if err := w.ready(ctx, r); err != nil {
			r.err = &UnitError{Plugin: r.unit.Plugin, Err: err}
			typ := PluginFailed
			if errors.Is(err, context.Canceled) {
				typ = PluginInterrupted
			}
			w.d.emit(Event{Type: typ, Wave: w.n, Plugin: r.unit.Plugin, Message: err.Error()})
			return
		}
		all := append(kube.RefsOf(r.unit.Objects), kube.RefsOf(r.helm.Objects)...)
		w.d.emit(Event{Type: PluginReady, Wave: w.n, Plugin: r.unit.Plugin, Ready: len(all), Total: len(all)})
		if w.onReady != nil {
			w.onReady()
		}
		faultpoint.Hit("apply:before-prune")
		pruned, err := w.prune(ctx, r, all)
		if err != nil {
			r.err = &UnitError{Plugin: r.unit.Plugin, Err: fmt.Errorf("prune: %w", err)}
			return
		}
		if pruned > 0 {
			mu.Lock()
			w.res.Pruned += pruned
			mu.Unlock()
			w.d.emit(Event{Type: PluginPruned, Wave: w.n, Plugin: r.unit.Plugin, Total: pruned})
		}
		faultpoint.Hit("apply:before-finish")
		if err := w.finishRecord(ctx, r, all); err != nil {
			r.err = &UnitError{Plugin: r.unit.Plugin, Err: err}
		}
	})
}

// ready installs (or, for a rollback, restores) a unit's Helm releases and waits
// until its objects and theirs are ready; releases it changed are reverted or
// marked failed when they are not.
func (w *wave) ready(ctx context.Context, r *unitRun) error {
	faultpoint.Hit("apply:before-releases")
	var err error
	if r.unit.rollback != nil {
		r.helm, err = w.d.helm.RestoreAll(ctx, r.unit.rollback.Releases, r.unit.rollback.HelmRevisions)
	} else {
		r.helm, err = w.d.helm.InstallAll(ctx, r.unit.Plugin, r.unit.Releases)
	}
	if err != nil {
		return err
	}
	objs := append(slices.Clone(r.applied), r.helm.Objects...)
	ready := ssa.WaitProgress{
		Ready: func(obj kube.ObjRef, ready, total int) {
			w.d.emit(Event{Type: ObjectReady, Wave: w.n, Plugin: r.unit.Plugin, Object: obj.String(), Ready: ready, Total: total})
		},
		Waiting: func(obj kube.ObjRef, why string, ready, total int) {
			w.d.emit(Event{Type: ObjectWaiting, Wave: w.n, Plugin: r.unit.Plugin, Object: obj.String(), Message: why, Ready: ready, Total: total})
		},
	}
	if err := w.d.ssa.WaitReady(ctx, objs, len(r.applied), r.health, ready); err != nil {
		return w.d.helm.Failed(ctx, r.helm.Done, err)
	}
	// Only now that what serves them is ready: the unit's APIServices and webhook
	// configurations, then until the APIServices are Available.
	before, keptBefore := len(r.applied), r.kept
	jobs := w.stageJobs(r, ssa.StageServing) // what is unchanged joins r.applied
	w.mu.Lock()
	w.res.Applied += r.kept - keptBefore
	w.mu.Unlock()
	if len(r.applied) == before && len(jobs) == 0 {
		return nil
	}
	w.applyJobs(ctx, jobs)
	if r.err != nil {
		err := r.err
		r.err = nil // the caller wraps what ready returns
		if ue := (*UnitError)(nil); errors.As(err, &ue) {
			return fmt.Errorf("apply %s: %w", ue.Object, ue.Err)
		}
		return err
	}
	w.mu.Lock()
	w.res.Applied += len(r.applied) - before
	w.mu.Unlock()
	if err := w.d.ssa.WaitReady(ctx, slices.Clone(r.applied[before:]), len(r.applied)-before, r.health, ready); err != nil {
		return w.d.helm.Failed(ctx, r.helm.Done, err)
	}
	return nil
}

// prune removes what the plugin's previous revision had and the unit no longer
// produces: Helm releases first, then objects (ssa.DeleteStages order). It
// returns how many objects existed.
func (w *wave) prune(ctx context.Context, r *unitRun, all []ObjRef) (int, error) {
	for _, rel := range helm.Minus(r.old.HelmReleases(), unitReleases(r.unit)) {
		_, kept, err := w.d.helm.Remove(ctx, rel)
		if err != nil {
			return 0, err
		}
		w.d.keptEvents(w.n, r.unit.Plugin, kept)
	}
	n, kept, err := w.d.ssa.DeleteAll(ctx, kube.Minus(r.old.Inventory(), all))
	w.d.keptEvents(w.n, r.unit.Plugin, refStrings(kept))
	return n, err
}

// recordFailures marks failed the revision each failed unit recorded, keeping the
// widened inventory; with RollbackOnFailure it restores the previous revision.
func (w *wave) recordFailures(ctx context.Context) {
	for _, r := range w.runs {
		if r.err == nil || r.rec == nil {
			continue
		}
		var ue *UnitError
		if errors.As(r.err, &ue) {
			ue.Err = w.failRecord(ctx, r, ue.Err, r.err.Error())
		} else {
			r.err = w.failRecord(ctx, r, r.err, r.err.Error())
		}
	}
}

// err joins one *UnitError per failed unit.
func (w *wave) err() error {
	var errs []error
	for _, r := range w.runs {
		if r.err == nil {
			continue
		}
		err := r.err
		var ue *UnitError
		if !errors.As(err, &ue) {
			err = &UnitError{Plugin: r.unit.Plugin, Err: err}
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
