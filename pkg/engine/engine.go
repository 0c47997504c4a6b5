package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"sync"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/redact"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/resolve"
	"github.com/kubeplug/kubeplug/pkg/runtime/declarative"
	"github.com/kubeplug/kubeplug/pkg/source"
	"github.com/kubeplug/kubeplug/pkg/stage"
	"github.com/kubeplug/kubeplug/pkg/values"
)

// Options configure an Engine.
type Options struct {
	// Logger receives progress; discarded when nil.
	Logger *slog.Logger
	// Env resolves valuesFrom environment variables; os.LookupEnv when nil.
	Env config.Env
	// AllowValuesOutside lets valuesFrom read files outside the cluster file's
	// directory (config.Cluster.AllowValuesOutside).
	AllowValuesOutside bool
	// Redact renders with every plugin's sensitive values replaced by "***": for
	// files meant for review and version control. Deploying needs the real values.
	Redact bool
	// Parallelism bounds how many plugins of one wave run at once. Default 4.
	Parallelism int
	// Runtimes gives every planned plugin the runtimes that run its stages
	// (runtime.Resolver is the standard one). Nil runs plugins' declarative parts
	// only: a package with a spec.runtime is then a fatal diagnostic at Plan, as
	// the engine cannot run its code.
	Runtimes RuntimeResolver
	// Progress, when set, is told when each wave of each stage starts.
	Progress func(StageEvent)
	// Prefer names, per plugin, the version Plan picks whenever the cluster's
	// constraints admit it, even if a higher one exists (resolve.Request.Prefer):
	// the versions a lock file pins. Plan then also says which higher versions
	// the constraints would admit (Plan.Newer).
	Prefer map[string]*semver.Version
	// Access, when set, gives the code of a plugin (spec.runtime) a kubeconfig
	// for the target cluster at the deploy and validate stages
	// (stage.Request.Kubeconfig).
	Access Access
	// Facts, when set, completes the cluster's facts (stage.Facts) with the
	// provider's; nil leaves those facts empty.
	Facts ProviderFacts
}

// Access gives plugin code credentials for the cluster it is deployed to.
type Access interface {
	// Kubeconfig returns a kubeconfig (YAML) for the cluster as pkg's own
	// identity, scoped to what pkg declares (spec.runtime.rbac); "" when
	// there is no cluster to reach (yet). An error stops pkg's stage.
	Kubeconfig(ctx context.Context, pkg *plugin.Package) (string, error)
}

// RuntimeResolver gives a planned plugin the runtimes that run its stages.
type RuntimeResolver interface {
	// Runtimes returns the runtimes of pkg, in the order they run at every stage
	// (declarative parts first, by convention). scope is the node pools the cluster
	// enables the plugin for, to which its node contributions are limited; nil means
	// every pool. Runtimes is called once per planned plugin while planning and
	// must start nothing: processes start at a runtime's first Run, and ending them
	// is the business of whoever made the resolver. An error says why pkg cannot
	// run (a broken spec.runtime) and becomes a fatal diagnostic located at pkg's
	// spec.runtime.
	Runtimes(pkg *plugin.Package, scope []string) ([]stage.Runtime, error)
}

// RuntimeResolverFunc adapts a function to a RuntimeResolver.
type RuntimeResolverFunc func(pkg *plugin.Package, scope []string) ([]stage.Runtime, error)

// Runtimes calls f.
func (f RuntimeResolverFunc) Runtimes(pkg *plugin.Package, scope []string) ([]stage.Runtime, error) {
	return f(pkg, scope)
}

// PlanChecker is an optional capability of a RuntimeResolver: when a plan is
// complete, Plan passes the names of the plugins it runs, in order, to CheckPlan
// and adds the diagnostics it returns (runtime.Resolver warns about in-process
// runtimes registered for plugins the plan does not run).
type PlanChecker interface {
	CheckPlan(plugins []string) diag.List
}

var _ RuntimeResolver = RuntimeResolverFunc(nil)

// StageEvent says that a wave of a stage starts.
type StageEvent struct {
	Stage stage.Stage `json:"stage"`
	// Wave counts from 0, of Waves.
	Wave    int      `json:"wave"`
	Waves   int      `json:"waves"`
	Plugins []string `json:"plugins"`
}

// Engine plans and runs the lifecycle stages.
type Engine struct {
	opts Options
	log  *slog.Logger
}

// New returns an engine.
func New(opts Options) *Engine {
	if opts.Parallelism <= 0 {
		opts.Parallelism = 4
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Engine{opts: opts, log: log}
}

// Planned is one resolved plugin, ready to run.
type Planned struct {
	Package *plugin.Package
	Values  *config.Values
	// Checks are the plugin's validate checks (spec.validate) rendered for
	// this cluster and its values; callers that change which checks run
	// (expansions) change this list.
	Checks []v1alpha1.Check
	// Wave is the plugin's wave, from 0.
	Wave int
	// After names the plugins of the plan this one waits for (resolve.Result.After),
	// sorted: all in earlier waves. A caller that starts a plugin once these are
	// done, rather than once its whole previous wave is, keeps the plan's order.
	After    []string
	runtimes []stage.Runtime
}

// Plan is a resolved cluster: which plugin versions run, in which waves, with which
// values.
type Plan struct {
	Cluster *config.Cluster
	Plugins []*Planned
	Waves   [][]*Planned

	// Newer is, by name, the version a plugin of the plan would have without
	// Options.Prefer, where that is a higher one (a version published after
	// the lock was written); empty without Options.Prefer.
	Newer map[string]string

	secrets planSecrets
	// others are every plugin's values as the other plugins see them, computed
	// once when the plan is made.
	others map[string]stage.PluginValues
	// facts are the cluster's facts, computed once when the plan is made.
	facts *stage.Facts
}

// Plan resolves the cluster's enabled plugins against the catalog's listing, fetches
// the packages the resolution picked (Parallelism at once) and computes their values.
// Diagnostics explain every problem; the plan is nil when any is fatal.
//
// Its steps: the resolve request from the cluster file, the resolution (its
// failure pointed at in the file), the fetch, each plugin's values and
// runtimes wave by wave, and the validate checks rendered with every
// plugin's values.
func (e *Engine) Plan(ctx context.Context, cl *config.Cluster, cat source.Catalog) (*Plan, diag.List) {
	req, refIndex, l := e.resolveRequest(cl)
	if l.HasFatal() {
		return nil, l
	}
	res, err := resolve.Resolve(ctx, catalog(cat), req)
	if err != nil {
		resolveFailed(ctx, &l, cl, cat, refIndex, err)
		return nil, l
	}
	pkgs, fl := e.fetch(ctx, cat, res.Plugins)
	l = append(l, fl...)
	if fl.HasFatal() {
		l.Sort()
		return nil, l
	}
	plan := &Plan{Cluster: cl}
	plan.Newer = e.newer(ctx, cat, req, res)
	for w, wave := range res.Waves {
		var pw []*Planned
		for _, rp := range wave {
			pkg := pkgs[rp]
			if p := e.planned(ctx, &l, cl, refIndex, pkg, w, res.After[pkg.Name]); p != nil {
				pw = append(pw, p)
			}
		}
		plan.Waves = append(plan.Waves, pw)
		plan.Plugins = append(plan.Plugins, pw...)
	}
	if pc, ok := e.opts.Runtimes.(PlanChecker); ok {
		l = append(l, pc.CheckPlan(plan.Names())...)
	}
	l.Sort()
	if l.HasFatal() {
		return nil, l
	}
	plan.others = pluginValues(plan)
	plan.facts = e.facts(plan)
	for _, p := range plan.Plugins {
		checks, cl := declarative.RenderChecks(ctx, p.Package, e.request(plan, p, stage.Validate, nil, plan.others))
		l = append(l, cl...)
		p.Checks = checks
	}
	if l.HasFatal() {
		l.Sort()
		return nil, l
	}
	return plan, l
}

// resolveRequest is the resolve request the cluster file makes, with the index of
// each enabled plugin in spec.plugins.enabled.
func (e *Engine) resolveRequest(cl *config.Cluster) (resolve.Request, map[string]int, diag.List) {
	var l diag.List
	req := resolve.Request{KubernetesVersion: cl.KubernetesVersion, Prefer: e.opts.Prefer}
	if cl.Spec != nil {
		if prov, err := v1alpha1.ProviderName(cl.Spec.Spec.Provider); err == nil {
			req.Provider = prov
		}
	}
	refIndex := map[string]int{}
	for i, ref := range cl.Enabled() {
		r := resolve.Requirement{Name: ref.Name}
		if ref.Version != "" {
			c, err := semver.NewConstraint(ref.Version)
			if err != nil {
				cl.Errorf(&l, fmt.Sprintf("/spec/plugins/enabled/%d/version", i), "invalid version constraint: %v", err)
				continue
			}
			r.Constraint = c
		}
		req.Enabled = append(req.Enabled, r)
		refIndex[ref.Name] = i
	}
	if cl.Spec.Spec.Plugins != nil {
		req.Order = cl.Spec.Spec.Plugins.Order
	}
	return req, refIndex, l
}

// resolveFailed points a resolution's failure at the file: a plugin the
// cluster enables and no source provides (a typo, often), or one for other
// providers than the cluster's, where the cluster enables it; a version no
// constraint lets through, or a plugin a package requires that no source
// provides, where the constraint is written (the cluster's entry, else the
// requiring plugin's manifest); else at spec.plugins.
func resolveFailed(ctx context.Context, l *diag.List, cl *config.Cluster, cat source.Catalog, refIndex map[string]int, err error) {
	if me, ok := errors.AsType[*resolve.MissingError](err); ok && requestedByCluster(me.Wants) {
		if i, ok := refIndex[me.Name]; ok {
			cl.Errorf(l, fmt.Sprintf("/spec/plugins/enabled/%d/name", i), "cannot resolve plugins: %v", err)
			return
		}
	}
	if pe, ok := errors.AsType[*resolve.ProviderError](err); ok && slices.Contains(pe.RequiredBy, resolve.RequestedBy) {
		if i, ok := refIndex[pe.Name]; ok {
			cl.Errorf(l, fmt.Sprintf("/spec/plugins/enabled/%d/name", i), "cannot resolve plugins: %v", err)
			return
		}
	}
	var ws []resolve.Want
	key := "version"
	if ue, ok := errors.AsType[*resolve.UnsatisfiableError](err); ok {
		ws = ue.Wants
	} else if me, ok := errors.AsType[*resolve.MissingError](err); ok {
		ws, key = me.Wants, "name"
	}
	if locateWant(ctx, l, cl, cat, refIndex, ws, key, err) {
		return
	}
	l.Errorf(cl.File, 0, 0, "spec.plugins", "cannot resolve plugins: %v", err)
}

// planned is pkg in wave w with its values (the cluster's entry, or its
// defaults when another plugin's requires pulled it in) and its runtimes;
// nil after an error in l.
func (e *Engine) planned(ctx context.Context, l *diag.List, cl *config.Cluster, refIndex map[string]int, pkg *plugin.Package, w int, after []string) *Planned {
	p := &Planned{Package: pkg, Wave: w, After: after}
	var scope []string
	defaults, dl := declarative.RenderDefaults(ctx, pkg, cl.Spec)
	*l = append(*l, dl...)
	if dl.HasFatal() {
		return nil
	}
	if i, ok := refIndex[pkg.Name]; ok {
		v, vl := cl.ValuesWith(i, pkg, config.ValuesOptions{Env: e.opts.Env, AllowOutside: e.opts.AllowValuesOutside, Defaults: defaults})
		*l = append(*l, vl...)
		p.Values = v
		for _, np := range cl.Enabled()[i].NodePools {
			scope = append(scope, np.Name)
		}
	} else {
		// Pulled in by another plugin's requires: its defaults, checked
		// against its schema when the package loaded.
		p.Values = &config.Values{Plugin: pkg, Cluster: defaults, Sensitive: pkg.Sensitive()}
	}
	switch {
	case e.opts.Runtimes != nil:
		rts, err := e.opts.Runtimes.Runtimes(pkg, scope)
		if err != nil {
			file, line, col, field := pkg.ManifestPos("/spec/runtime")
			l.Errorf(file, line, col, field, "plugin %s: %v", pkg.Name, err)
			return nil
		}
		p.runtimes = rts
	case pkg.Manifest.Spec.Runtime != nil:
		file, line, col, field := pkg.ManifestPos("/spec/runtime")
		l.Errorf(file, line, col, field, "plugin %s has a %s runtime, but this engine runs no plugin code", pkg.Name, pkg.Manifest.Spec.Runtime.Type)
		return nil
	default:
		p.runtimes = []stage.Runtime{declarative.New(pkg, scope)}
	}
	return p
}

// newer returns, for a resolution res of req made with preferences, the
// version of each plugin a resolution without them picks, where that is a
// higher one. When a resolution without preferences fails where this one did
// not, there is no consistent set of newer versions to move to: none.
func (e *Engine) newer(ctx context.Context, cat source.Catalog, req resolve.Request, res *resolve.Result) map[string]string {
	if len(req.Prefer) == 0 {
		return nil
	}
	req.Prefer = nil
	free, err := resolve.Resolve(ctx, catalog(cat), req)
	if err != nil {
		e.log.Debug("resolution without the preferred versions failed", "error", err)
		return nil
	}
	picked := map[string]*semver.Version{}
	for _, p := range res.Plugins {
		picked[p.Name] = p.Version
	}
	newer := map[string]string{}
	for _, p := range free.Plugins {
		if v, ok := picked[p.Name]; ok && p.Version.GreaterThan(v) {
			newer[p.Name] = p.Version.String()
		}
	}
	return newer
}

// locateWant reports err at the first of ws that can be located: the
// cluster's spec.plugins.enabled entry for a constraint the cluster placed,
// else the requiring plugin's spec.requires entry in its plugin.yaml (fetching
// that package, which the failed resolution has not done). key is the entry's
// field at fault, "name" or "version"; an entry without a version is pointed
// at by its name. It returns false, reporting nothing, when none can be located.
func locateWant(ctx context.Context, l *diag.List, cl *config.Cluster, cat source.Catalog, refIndex map[string]int, ws []resolve.Want, key string, err error) bool {
	for _, w := range ws {
		if w.By != resolve.RequestedBy {
			continue
		}
		if i, found := refIndex[w.Name]; found {
			ptr := fmt.Sprintf("/spec/plugins/enabled/%d/%s", i, key)
			if cl.Enabled()[i].Version == "" {
				ptr = fmt.Sprintf("/spec/plugins/enabled/%d/name", i)
			}
			cl.Errorf(l, ptr, "cannot resolve plugins: %v", err)
			return true
		}
	}
	for _, w := range ws {
		v, isVersion := packageVersion(w.Package)
		if !isVersion {
			continue
		}
		pkg, fl := cat.Fetch(ctx, v)
		if pkg == nil || fl.HasFatal() {
			continue
		}
		for j, r := range pkg.Manifest.Spec.Requires {
			if r.Name != w.Name {
				continue
			}
			ptr := fmt.Sprintf("/spec/requires/%d/%s", j, key)
			if r.Version == "" {
				ptr = fmt.Sprintf("/spec/requires/%d/name", j)
			}
			file, line, col, field := pkg.ManifestPos(ptr)
			if line > 0 {
				l.Errorf(file, line, col, field, "cannot resolve plugins: %v", err)
				return true
			}
		}
	}
	return false
}

// packageVersion is the source listing behind a resolver package, if any.
func packageVersion(p *resolve.Package) (*source.Version, bool) {
	if p == nil {
		return nil, false
	}
	v, ok := p.Source.(*source.Version)
	return v, ok
}

// requestedByCluster reports whether the cluster file itself placed one of ws.
func requestedByCluster(ws []resolve.Want) bool {
	return slices.ContainsFunc(ws, func(w resolve.Want) bool { return w.By == resolve.RequestedBy })
}

// namedCatalog is a resolve.Catalog that lists its names too, so that the
// resolver can suggest the closest to a missing one.
type namedCatalog struct {
	resolve.CatalogFunc
	names func() []string
}

func (c namedCatalog) Names() []string { return c.names() }

// catalog adapts a source catalog's listing to the resolver, each name once: the
// resolver compares packages by pointer. A catalog that lists its names (the
// source index does) lists them to the resolver too.
func catalog(cat source.Catalog) resolve.Catalog {
	f := versions(cat)
	if nl, ok := cat.(resolve.NameLister); ok {
		return namedCatalog{CatalogFunc: f, names: nl.Names}
	}
	return f
}

// versions is the resolver's view of cat's versions.
func versions(cat source.Catalog) resolve.CatalogFunc {
	var cache sync.Map
	return resolve.CatalogFunc(func(name string) []*resolve.Package {
		if v, ok := cache.Load(name); ok {
			return v.([]*resolve.Package)
		}
		var out []*resolve.Package
		for _, v := range cat.Versions(name) {
			rp := &resolve.Package{
				Name: v.Name, Version: v.Version, KubernetesVersion: v.KubernetesVersion, Providers: v.Providers, Source: v,
				Conflicts: v.Conflicts, After: v.After, Before: v.Before,
			}
			for _, r := range v.Requires {
				rp.Requires = append(rp.Requires, resolve.Requirement{Name: r.Name, Constraint: r.Constraint})
			}
			out = append(out, rp)
		}
		v, _ := cache.LoadOrStore(name, out)
		return v.([]*resolve.Package)
	})
}

// fetch fetches the packages the resolution picked, Parallelism at once, with the
// diagnostics in resolution order.
func (e *Engine) fetch(ctx context.Context, cat source.Catalog, picked []*resolve.Package) (map[*resolve.Package]*plugin.Package, diag.List) {
	vs := make([]*source.Version, len(picked))
	for i, rp := range picked {
		vs[i] = rp.Source.(*source.Version)
	}
	pkgs, l := source.FetchAll(ctx, cat, vs, e.opts.Parallelism)
	out := make(map[*resolve.Package]*plugin.Package, len(picked))
	for i, rp := range picked {
		out[rp] = pkgs[i]
	}
	return out, l
}

// Result is what a run produced.
type Result struct {
	Model *model.Model
	// Stages lists the stages that completed.
	Stages []stage.Stage
}

// Seed returns the model a run of plan starts from: the cluster's node pools
// (the control-plane pseudo pool first) with the labels and taints cluster.yaml
// gives them, contributed by the core as "cluster.yaml". Every stage then adds to
// this one model.
func (e *Engine) Seed(plan *Plan) *model.Model {
	spec := plan.Cluster.Spec
	pools := []model.PoolSpec{{Name: model.ControlPlanePool, Role: model.RoleControlPlane, Count: 1}}
	if cp := spec.Spec.ControlPlane; cp != nil && cp.Count > 0 {
		pools[0].Count = cp.Count
	}
	for _, np := range spec.Spec.NodePools {
		pools = append(pools, model.PoolSpec{Name: np.Name, Role: cmp.Or(np.Role, model.RoleWorker), Count: np.Count, MinSize: np.MinSize, MaxSize: np.MaxSize})
	}
	m := model.New(pools...)
	for _, np := range spec.Spec.NodePools {
		// The cluster's own pool labels and taints, contributed by the core.
		p := &model.Pool{Name: np.Name}
		for k, v := range np.Labels {
			if p.Kubelet.Labels == nil {
				p.Kubelet.Labels = map[string]model.Setting[string]{}
			}
			p.Kubelet.Labels[k] = model.Setting[string]{Value: v}
		}
		for _, t := range np.Taints {
			p.Kubelet.Taints = append(p.Kubelet.Taints, model.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
		m.Add("cluster.yaml", &model.Contribution{Pools: map[string]*model.Pool{np.Name: p}})
	}
	return m
}

// Run seeds a model and runs the plan's plugins through the stages in order, up
// to and including until, every wave of a stage before the next stage. It stops
// after the first stage that produced a fatal diagnostic. It is the whole
// lifecycle for callers that do nothing between waves (render, plan); callers
// that reach a cluster between waves (apply, up) compose Seed, RunStage and
// RunWave themselves.
func (e *Engine) Run(ctx context.Context, plan *Plan, until stage.Stage) (*Result, diag.List) {
	res := &Result{Model: e.Seed(plan)}
	var all diag.List
	for _, st := range stage.Stages {
		l := e.RunStage(ctx, plan, st, res.Model)
		all = append(all, l...)
		if l.HasFatal() || ctx.Err() != nil {
			return res, all
		}
		res.Stages = append(res.Stages, st)
		if st == until {
			break
		}
	}
	return res, all
}

// pluginValues returns every plugin's values as others see them: sensitive values
// redacted.
func pluginValues(plan *Plan) map[string]stage.PluginValues {
	out := map[string]stage.PluginValues{}
	for _, p := range plan.Plugins {
		out[p.Package.Name] = stage.PluginValues{Version: p.Package.Version.String(), Values: p.Values.Redacted()}
	}
	return out
}

// RunStage runs st for every wave of plan in order, merging the plugins'
// contributions into m. A plugin's fatal diagnostic does not stop the later waves
// (the stage reports every plugin's problems); an interrupted context does.
func (e *Engine) RunStage(ctx context.Context, plan *Plan, st stage.Stage, m *model.Model) diag.List {
	var all diag.List
	for w := range plan.Waves {
		all = append(all, e.RunWave(ctx, plan, st, w, m)...)
		if ctx.Err() != nil {
			return all
		}
	}
	return all
}

// RunWave runs st for the plugins of plan's wave (counted from 0), at most
// Options.Parallelism at once, and merges their contributions into m in the
// wave's order, whatever order they finished in. It returns the wave's
// diagnostics; deciding whether a fatal one stops the run is the caller's. A
// cancelled context yields a fatal "interrupted" diagnostic.
//
// It is the seam of the lifecycle: a caller runs the deploy stage of wave w,
// deploys wave w, and waits for it before wave w+1; or the validate stage of
// wave w, then the wave's checks.
func (e *Engine) RunWave(ctx context.Context, plan *Plan, st stage.Stage, w int, m *model.Model) diag.List {
	e.StartWave(plan, st, w)
	return e.run(ctx, plan, st, plan.Waves[w], m)
}

// StartWave logs that wave w of st starts and tells Options.Progress, as RunWave
// does: for a caller that runs the wave's plugins one by one with RunPlugin.
func (e *Engine) StartWave(plan *Plan, st stage.Stage, w int) {
	wave := plan.Waves[w]
	if w == 0 {
		e.log.Info("stage started", "stage", st, "plugins", len(plan.Plugins), "waves", len(plan.Waves))
	}
	e.log.Debug("wave started", "stage", st, "wave", w, "plugins", len(wave))
	if e.opts.Progress != nil {
		ev := StageEvent{Stage: st, Wave: w, Waves: len(plan.Waves)}
		for _, p := range wave {
			ev.Plugins = append(ev.Plugins, p.Package.Name)
		}
		e.opts.Progress(ev)
	}
}

// RunPlugin runs st for one plugin of plan and merges its contribution into m,
// as RunWave does for each plugin of a wave, for a caller that starts each
// plugin on its own (apply's deploy stage starts a plugin once the plugins it
// waits for are ready). It tells Options.Progress nothing (see StartWave). Calls
// that share m must not overlap.
func (e *Engine) RunPlugin(ctx context.Context, plan *Plan, st stage.Stage, p *Planned, m *model.Model) diag.List {
	return e.run(ctx, plan, st, []*Planned{p}, m)
}

// run runs st for plugins, at most Options.Parallelism at once, and merges
// their contributions into m in their order.
func (e *Engine) run(ctx context.Context, plan *Plan, st stage.Stage, wave []*Planned, m *model.Model) diag.List {
	var all diag.List
	// Runtimes scrub what plugin code prints of these.
	ctx = redact.NewContext(ctx, plan.Secrets())
	others := plan.others
	if others == nil {
		// A plan not made by Engine.Plan.
		others = pluginValues(plan)
	}
	type answer struct {
		resps []*stage.Response
		l     diag.List
	}
	answers := make([]answer, len(wave))
	sem := make(chan struct{}, e.opts.Parallelism)
	var wg sync.WaitGroup
	for i, p := range wave {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			req := e.request(plan, p, st, m, others)
			if (st == stage.Deploy || st == stage.Validate) && e.opts.Access != nil && p.Package.Manifest.Spec.Runtime != nil {
				kc, err := e.opts.Access.Kubeconfig(ctx, p.Package)
				if err != nil {
					answers[i].l = append(answers[i].l, diag.Diagnostic{Severity: diag.Fatal, Plugin: p.Package.Name, Message: fmt.Sprintf("%s stage: credentials for the plugin's code: %v", st, err)})
					return
				}
				req.Kubeconfig = kc
			}
			for _, rt := range p.runtimes {
				resp, err := rt.Run(ctx, req)
				if err != nil {
					answers[i].l = append(answers[i].l, diag.Diagnostic{Severity: diag.Fatal, Plugin: p.Package.Name, Message: fmt.Sprintf("%s stage failed: %v", st, plan.Secrets().Error(err))})
					return
				}
				if resp != nil {
					answers[i].resps = append(answers[i].resps, resp)
				}
			}
		})
	}
	wg.Wait()
	for i, p := range wave {
		all = append(all, answers[i].l...)
		for _, resp := range answers[i].resps {
			for _, d := range resp.Diagnostics {
				if d.Plugin == "" {
					d.Plugin = p.Package.Name
				}
				d.Message = plan.Secrets().String(d.Message)
				all = append(all, d)
			}
			for _, d := range m.Add(p.Package.Name, resp.Contribution) {
				all = append(all, plan.locate(d))
			}
			if st == stage.Initialise {
				all = append(all, plan.initialised(p, resp.Values)...)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		all.Errorf("", 0, 0, "", "%s stage interrupted: %v", st, err)
	}
	return all
}

func (e *Engine) request(plan *Plan, p *Planned, st stage.Stage, m *model.Model, plugins map[string]stage.PluginValues) *stage.Request {
	vals, pools := p.Values.Cluster, p.Values.Pools
	if e.opts.Redact {
		vals = p.Values.Redacted()
		if pools != nil {
			red := map[string]map[string]any{}
			for k, v := range pools {
				red[k] = values.Redact(v, p.Values.Sensitive)
			}
			pools = red
		}
	}
	// Secrets go only to their owner: the cluster spec and the model are shown
	// with every other plugin's sensitive values masked.
	cluster, m := plan.view(p, m)
	return &stage.Request{
		Stage: st, Cluster: cluster, Plugin: p.Package.Name, Version: p.Package.Version.String(),
		Values: vals, PoolValues: pools, Plugins: plugins, Model: m, Facts: plan.facts,
	}
}

// locate points d, a diagnostic of the model about a key a plugin's
// contribution set, at that contribution's line in the plugin's plugin.yaml,
// when the contribution is declarative; a conflict also says where the other
// plugin set the key. d is returned as is when it cannot be located (plugin
// code contributed the key).
func (p *Plan) locate(d diag.Diagnostic) diag.Diagnostic {
	if d.File != "" || d.Field == "" {
		return d
	}
	pos := func(name string) (file string, line, col int, field string, ok bool) {
		i := slices.IndexFunc(p.Plugins, func(pl *Planned) bool { return pl.Package.Name == name })
		if i < 0 {
			return "", 0, 0, "", false
		}
		pkg := p.Plugins[i].Package
		ptr, ok := declarative.ContributionPtr(pkg, d.Field)
		if !ok {
			return "", 0, 0, "", false
		}
		file, line, col, field = pkg.ManifestPos(ptr)
		return file, line, col, field, line > 0
	}
	if other, ok := model.ConflictWith(d); ok {
		if file, line, col, _, ok := pos(other); ok {
			d.Message += fmt.Sprintf(" (%s sets it at %s:%d:%d)", other, file, line, col)
		}
	}
	if file, line, col, field, ok := pos(d.Plugin); ok {
		d.File, d.Line, d.Column, d.Field = file, line, col, field
	}
	return d
}

// patchField is the field of a render diagnostic about a patch of the model:
// the layer, the model's patch index, the operation's index and the rest.
var patchField = regexp.MustCompile(`^(cloud|kubernetes)\.patches\[(\d+)\](?:\.ops\[(\d+)\])?(\.target\.kind)?$`)

// LocatePatches points the diagnostics of l, render's, at the lines of the
// plugins' plugin.yaml that wrote what they are about, when the plugin is
// declarative: one about a cloud or kubernetes patch of m (render's
// "cloud.patches[i].ops[j]") at the operation's line, one about a key of the
// model (a flag, "controlPlane.kube-apiserver.flags.NAME") at the key's. The
// rest of l is returned as is.
func (p *Plan) LocatePatches(m *model.Model, l diag.List) diag.List {
	if m == nil {
		return l
	}
	out := make(diag.List, len(l))
	for n, d := range l {
		out[n] = d
		sm := patchField.FindStringSubmatch(d.Field)
		if d.File != "" {
			continue
		}
		if sm == nil {
			out[n] = p.locate(d)
			continue
		}
		out[n] = p.locatePatch(m, d, sm)
	}
	return out
}

// locatePatch points d, about the patch (or its operation) that sm, the
// submatches of patchField, names, at the line of the plugin.yaml that wrote
// it; d is returned as is when that is not a declarative plugin's.
func (p *Plan) locatePatch(m *model.Model, d diag.Diagnostic, sm []string) diag.Diagnostic {
	i, _ := strconv.Atoi(sm[2])
	var by []string
	var ops [][]model.PatchOp
	if sm[1] == "cloud" {
		for _, pt := range m.Cloud.Patches {
			by, ops = append(by, pt.By), append(ops, pt.Ops)
		}
	} else {
		for _, pt := range m.Kubernetes.Patches {
			by, ops = append(by, pt.By), append(ops, pt.Ops)
		}
	}
	if i >= len(by) || by[i] != d.Plugin {
		return d
	}
	// k: the plugin's own index of the patch.
	k := 0
	for _, b := range by[:i] {
		if b == by[i] {
			k++
		}
	}
	pl := slices.IndexFunc(p.Plugins, func(pl *Planned) bool { return pl.Package.Name == d.Plugin })
	if pl < 0 {
		return d
	}
	pkg := p.Plugins[pl].Package
	ptr, ok := patchPtr(pkg, sm, k, ops[i])
	if !ok {
		return d
	}
	if file, line, col, field := pkg.ManifestPos(ptr); line > 0 {
		d.File, d.Line, d.Column, d.Field = file, line, col, field
	}
	return d
}

// patchPtr is the pointer, in pkg's plugin.yaml, of what sm names: the
// operation's path, or the patch (its target's kind when sm says so); k is
// the plugin's own index of the patch, ops its operations as rendered.
func patchPtr(pkg *plugin.Package, sm []string, k int, ops []model.PatchOp) (string, bool) {
	if sm[3] == "" {
		ptr, ok := declarative.PatchPtr(pkg, sm[1], k, -1, "", "")
		if ok && sm[4] != "" {
			ptr += "/target/kind"
		}
		return ptr, ok
	}
	j, _ := strconv.Atoi(sm[3])
	if j >= len(ops) {
		return "", false
	}
	ptr, ok := declarative.PatchPtr(pkg, sm[1], k, j, ops[j].Op, ops[j].Path)
	return ptr + "/path", ok // what every patch error is about
}

// Names returns the plan's plugin names in order.
func (p *Plan) Names() []string {
	out := make([]string, len(p.Plugins))
	for i, pl := range p.Plugins {
		out[i] = pl.Package.Name
	}
	return out
}
