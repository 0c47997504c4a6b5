package action

import (
	"context"
	"sync"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// The deploy step's scheduler. The plan's waves are what a reviewer reads: every
// plugin of a wave may run together, once the waves before it are done. Applying
// a wave at a time, though, keeps a plugin waiting for the slowest plugin of the
// wave before, which it may not even need, and leaves the request pipe half
// empty meanwhile. So each plugin is scheduled on its own: it starts as soon as
// the plugins it waits for (engine.Planned.After: what it requires, its ordering
// hints, the order list) are ready. That keeps every guarantee the waves give —
// no plugin's deploy stage runs, and none of its objects is applied, before what
// it waits for is applied and ready — since the waves are only those edges laid
// out in layers.

// schedule is one deploy step's scheduling state.
type schedule struct {
	r  *run
	lv *live
	// stageMu serialises the plugins' deploy stages, which share r.model.
	stageMu sync.Mutex
	// ready[name] is closed once the plugin's objects are ready.
	ready map[string]chan struct{}
	// stop is closed by the first failure: nothing starts after it, as no wave
	// started after a failed one.
	stop     chan struct{}
	stopOnce sync.Once

	mu    sync.Mutex // guards what follows
	diags diag.List
	waves []waveProgress
}

// waveProgress counts a wave's plugins down to its WaveFinished event.
type waveProgress struct {
	plugins, objects int
	// left counts the plugins that have not ended (applied, failed or never
	// started).
	left int
	// staged: the wave's deploy stage has started (engine.StartWave); started:
	// its first plugin is applied (WaveStarted).
	staged, started bool
	applied         int
}

// built is a plugin's deploy unit, begun (deploy.BeginUnit), or why it could
// not be made; neither when the run stopped first.
type built struct {
	begun *deploy.Begun
	err   error
}

// beginAhead bounds how many plugins' units are begun at once ahead of their
// turn (their records written, their live objects' metadata listed): enough to
// keep ahead of the applies, few enough that the first plugins' records are not
// queued behind the last's. A re-apply with nothing changed is those LISTs and
// little else: at 4 ahead, 21 plugins' LISTs took six rounds one after another.
const beginAhead = 8

// schedule applies every plugin of the plan, each as soon as the plugins it
// waits for are ready, and returns the diagnostics. Wave 0 has run its deploy
// stage and the content is rendered (deployStep); every other plugin runs its
// deploy stage when it starts.
func (lv *live) schedule(ctx context.Context, r *run) diag.List {
	s := &schedule{r: r, lv: lv, ready: map[string]chan struct{}{}, stop: make(chan struct{})}
	units := map[string]chan built{}
	for _, wave := range r.plan.Waves {
		wp := waveProgress{plugins: len(wave), left: len(wave)}
		for _, pl := range wave {
			s.ready[pl.Package.Name] = make(chan struct{})
			units[pl.Package.Name] = make(chan built, 1)
			wp.objects += len(lv.objects[pl.Package.Name])
		}
		s.waves = append(s.waves, wp)
	}
	chains := waitChains(r.plan.Plugins)
	var wg sync.WaitGroup
	// Units are made and begun ahead — rendered into objects, their records
	// written — in plan order, while the plugins before them apply: the first
	// needed is the first made, and none of it is left for when a plugin's turn
	// comes but applying.
	wg.Go(func() {
		sem := make(chan struct{}, beginAhead)
		for _, pl := range r.plan.Plugins {
			out := units[pl.Package.Name]
			if s.stopped(ctx) {
				out <- built{}
				continue
			}
			u, err := unit(pl, lv.objects[pl.Package.Name], lv.releases[pl.Package.Name])
			if err != nil {
				out <- built{err: err}
				continue
			}
			u.Machine = lv.machine[pl.Package.Name]
			u.Priority = chains[pl.Package.Name]
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				out <- built{begun: lv.deployer.BeginUnit(ctx, pl.Wave, u)}
			})
		}
	})
	for _, pl := range r.plan.Plugins {
		wg.Go(func() {
			applied := 0
			defer func() { s.ended(pl.Wave, applied) }()
			applied = s.plugin(ctx, pl, units[pl.Package.Name])
		})
	}
	wg.Wait()
	return s.diags
}

// waitChains is, for each plugin of the plan, how long the longest chain of
// plugins waiting on it is (0: none waits for it), as its unit's Priority:
// when plugins apply at once, the objects of those that others wait for go
// first, deepest chain first, so that the next plugins start while the pipe
// is still full rather than after the rest, in a pipe that empties.
func waitChains(plugins []*engine.Planned) map[string]int {
	waiters := map[string][]string{}
	for _, pl := range plugins {
		for _, a := range pl.After {
			waiters[a] = append(waiters[a], pl.Package.Name)
		}
	}
	chains := map[string]int{}
	var chain func(name string, seen int) int
	chain = func(name string, seen int) int {
		if n, ok := chains[name]; ok || seen > len(plugins) {
			return n // known, or a cycle the plan would have refused
		}
		n := 0
		for _, w := range waiters[name] {
			n = max(n, chain(w, seen+1)+1)
		}
		chains[name] = n
		return n
	}
	for _, pl := range plugins {
		chain(pl.Package.Name, 0)
	}
	return chains
}

// plugin waits for what pl waits for, runs its deploy stage (after wave 0),
// applies its unit and returns how many objects it applied. A unit begun and
// not applied, the run having stopped first, is abandoned.
func (s *schedule) plugin(ctx context.Context, pl *engine.Planned, unit <-chan built) int {
	r, name := s.r, pl.Package.Name
	b, ok := s.await(ctx, pl, unit)
	if !ok {
		return 0
	}
	if pl.Wave > 0 {
		s.stageMu.Lock()
		if wp := &s.waves[pl.Wave]; !wp.staged {
			wp.staged = true // only ever read under stageMu
			r.engine.StartWave(r.plan, stage.Deploy, pl.Wave)
		}
		l := r.engine.RunPlugin(ctx, r.plan, stage.Deploy, pl, r.model)
		s.stageMu.Unlock()
		if s.add(l); l.HasFatal() {
			s.abandon(ctx, name, b.begun, "not applied: its deploy stage failed")
			return 0
		}
	}
	if s.stopped(ctx) {
		s.abandon(ctx, name, b.begun, "not applied: the run stopped at an earlier failure")
		return 0
	}
	s.startWave(pl.Wave)
	var once sync.Once
	ready := func() { once.Do(func() { close(s.ready[name]) }) }
	wr, err := b.begun.Apply(ctx, ready)
	if err == nil {
		ready() // already, as a rule
	}
	applied := 0
	if wr != nil {
		applied = wr.Applied
		s.mu.Lock()
		s.lv.res.Applied += wr.Applied
		s.lv.res.Pruned += wr.Pruned
		s.mu.Unlock()
	}
	s.add(unitDiags(err))
	return applied
}

// await waits until every plugin pl waits for is ready and pl's unit is made
// and begun; ok is false when the run stopped first (pl's unit, begun, then
// abandoned) or the unit could not be made.
func (s *schedule) await(ctx context.Context, pl *engine.Planned, unit <-chan built) (b built, ok bool) {
	name := pl.Package.Name
	ok = true
	for _, a := range pl.After {
		select {
		case <-s.ready[a]:
			continue
		case <-s.stop:
		case <-ctx.Done():
		}
		ok = false
		break
	}
	b = <-unit // the maker sends for every plugin, whatever happens
	switch {
	case b.err != nil:
		var l diag.List
		l.Errorf("", 0, 0, "", "plugin %s: %v", name, b.err)
		s.add(l)
		return b, false
	case b.begun == nil:
		return b, false
	case !ok || s.stopped(ctx):
		s.abandon(ctx, name, b.begun, "not applied: the run stopped at an earlier failure")
		return b, false
	}
	return b, true
}

// abandon gives up a begun unit; a record that cannot be set right is a warning.
func (s *schedule) abandon(ctx context.Context, plugin string, b *deploy.Begun, why string) {
	if err := b.Abandon(ctx, why); err != nil {
		var l diag.List
		l.Warnf("", 0, 0, "", "plugin %s: %s, and its release record could not say so: %v", plugin, why, err)
		s.add(l)
	}
}

// stopped reports whether nothing may start any more: a plugin failed, or the
// run was cancelled.
func (s *schedule) stopped(ctx context.Context) bool {
	select {
	case <-s.stop:
		return true
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// add keeps l; a fatal diagnostic stops every plugin that has not started.
func (s *schedule) add(l diag.List) {
	if len(l) == 0 {
		return
	}
	s.mu.Lock()
	s.diags = append(s.diags, l...)
	s.mu.Unlock()
	if l.HasFatal() {
		s.stopOnce.Do(func() { close(s.stop) })
	}
}

// startWave says that wave w starts, when the first of its plugins is applied.
func (s *schedule) startWave(w int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if wp := &s.waves[w]; !wp.started {
		wp.started = true
		s.lv.deployer.StartWave(w, wp.plugins, wp.objects)
	}
}

// ended counts a plugin of wave w as ended, with so many objects applied; the
// last plugin of a wave that started says that the wave finished.
func (s *schedule) ended(w, applied int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	wp := &s.waves[w]
	wp.left--
	wp.applied += applied
	if wp.left == 0 && wp.started {
		s.lv.deployer.FinishWave(w, wp.applied, wp.objects)
	}
}
