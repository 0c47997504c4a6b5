package action

import (
	"context"
	"io/fs"
	"log/slog"
	"time"

	"github.com/kubeplug/kubeplug/internal/k8sversions"
	"github.com/kubeplug/kubeplug/internal/redact"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/lock"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/render"
	"github.com/kubeplug/kubeplug/pkg/runtime"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// The lifecycle is a pipeline of named steps over one run. A step reads what the
// steps before it set on the run, sets its own part, and returns diagnostics; the
// first fatal diagnostic ends the pipeline. Each verb lists its steps (see doc.go):
//
//	resolve      cluster spec, sources        -> engine, plan, plugin processes
//	initialise   plan                         -> model (seeded with the cluster's pools)
//	render       plan, model                  -> model (finished)
//	provision    model, rendered machines     -> running cluster, its REST config   (up)
//	connect      REST config                  -> deployer, lease, downgrade check  (apply, up)
//	deploy       plan, model, deployer        -> each plugin, once those it waits for are
//	                                             ready: its deploy stage, then its content
//	                                             applied and ready (schedule.go)
//	after-deploy provider                     -> machines' afterDeploy hooks        (up)
//	cluster-ready model, REST config          -> the provider's readiness conditions (up;
//	                                             clusterready.go)
//	validate     plan, model, REST config     -> each wave: its plugins' validate stage, then
//	                                             their checks
//	record       deployer, plan               -> plugins the plan no longer has uninstalled
//
// A plugin's values enter at resolve (engine.Plan computes them from the cluster
// spec and the package's defaults and schema), reach the plugin's code in every
// stage request, and become model contributions; the rendered content is applied
// with a digest of them, which the release record keeps.
type run struct {
	cfg *Config
	// cluster is the run's input, checked, with its source positions.
	cluster *config.Cluster
	// redact makes every stage see sensitive values as "***" (files and reports).
	redact bool

	// Set by resolve.
	engine   *engine.Engine
	plan     *engine.Plan
	runtimes *runtime.Resolver // the plugin processes; close ends them
	// lock is the cluster file's kubeplug.lock, nil without one.
	lock *lock.File

	// Seeded by the first stage step, extended by every stage.
	model *model.Model
	// stages lists the stages that completed.
	stages []stage.Stage

	// The cluster side (apply, up): see deploysteps.go.
	live live
	// Set by provision (up).
	prov    provider.Provider
	running *provider.Running

	// exp is the run's expansions (expansion_use.go); nil without.
	exp *expansions

	// charts are the charts by reference the model's Helm releases name,
	// fetched after each stage (charts.go).
	charts fetched
	// deps are the chart dependencies fetched (or not) for each plugin's
	// charts, by depKey; depsDone the releases whose charts were walked.
	deps     map[string]map[string]depResult
	depsDone map[string]bool
	// urlFiles are the node files downloaded from their URLs, by SHA-256,
	// fetched after each stage (urlfiles.go).
	urlFiles map[string][]byte
}

// stepName names a step of the pipeline. Expansions' hooks (expansionHooks) and
// skipSteps key on it; the stage steps are named by their stage
// (stepName(stage.Render)).
type stepName string

// The steps' names, as the table of docs/architecture.md lists them.
const (
	stepProvider    stepName = "provider"
	stepLock        stepName = "lock"
	stepFacts       stepName = "facts"
	stepResolve     stepName = "resolve"
	stepRender               = stepName(stage.Render)
	stepProvision   stepName = "provision"
	stepConnect     stepName = "connect"
	stepDeploy      stepName = "deploy"
	stepAfterDeploy stepName = "after-deploy"
	stepValidate    stepName = "validate"
	stepRecord      stepName = "record"
)

// step is one named step of the lifecycle.
type step struct {
	name stepName
	do   func(ctx context.Context, r *run) diag.List
}

// newRun returns a run of cl; close it when done.
func (c *Config) newRun(cl *config.Cluster, redact bool) *run {
	return &run{cfg: c, cluster: cl, redact: redact}
}

func (r *run) log() *slog.Logger { return r.cfg.logger() }

// pipeline runs steps in order and stops after the first that returns a fatal
// diagnostic. The diagnostics are sorted.
func (r *run) pipeline(ctx context.Context, steps ...step) diag.List {
	var all diag.List
	for _, s := range steps {
		start := time.Now()
		r.log().Debug("step started", "step", s.name)
		sctx := ctx
		if r.plan != nil {
			// Plugin code, checks and their errors are scrubbed of every
			// sensitive value the plan holds.
			sctx = redact.NewContext(ctx, r.plan.Secrets())
		}
		l := r.doStep(sctx, s)
		all = append(all, l...)
		r.log().Debug("step finished", "step", s.name, "duration", time.Since(start), "fatal", l.HasFatal())
		if l.HasFatal() {
			break
		}
	}
	all.Sort()
	return all
}

// close stops every plugin process the run started.
func (r *run) close() {
	r.closeExpansions()
	if r.runtimes == nil {
		return
	}
	if err := r.runtimes.Close(); err != nil {
		r.log().Warn("stopping plugin processes", "error", err)
	}
}

// resolveStep loads the configured sources and the cluster's own, and resolves
// the plan: which plugin versions run, in which waves, with which values.
// Input: the cluster spec. Output: r.engine, r.plan, r.runtimes.
var resolveStep = step{stepResolve, func(ctx context.Context, r *run) diag.List {
	c := r.cfg
	lf, err := readLock(r.cluster)
	if err != nil {
		var l diag.List
		l.Errorf(lock.PathFor(r.cluster.File), 0, 0, "", "%v", err)
		return l
	}
	idx, l := c.LoadIndex(ctx, r.cluster.Sources()...)
	if l.HasFatal() {
		return l
	}
	rs := runtime.NewResolver(runtime.Options{Logger: c.logger(), Timeout: c.PluginTimeout, InProcess: c.InProcess})
	e := engine.New(engine.Options{Facts: provider.FactsOf, Logger: c.logger(), Env: c.env(), AllowValuesOutside: c.AllowValuesOutside, Redact: r.redact, Runtimes: rs, Progress: c.Progress, Prefer: c.prefer(lf),
		Access: &pluginAccess{r: r}})
	plan, pl := e.Plan(ctx, r.cluster, idx)
	l = append(l, pl...)
	if plan == nil {
		_ = rs.Close() // nothing has run yet
		return l
	}
	if ll := c.checkLock(r.cluster, lf, plan); ll.HasFatal() {
		_ = rs.Close()
		return append(l, ll...)
	}
	r.engine, r.plan, r.runtimes, r.lock = e, plan, rs, lf
	return l
}}

// stageStep runs every plugin through st, wave by wave, with nothing between
// the waves. Input: r.plan, r.model (seeded on first use). Output: r.model
// extended with the plugins' contributions; st appended to r.stages.
func stageStep(st stage.Stage) step {
	return step{stepName(st), func(ctx context.Context, r *run) diag.List {
		r.seed()
		l := r.engine.RunStage(ctx, r.plan, st, r.model)
		if !l.HasFatal() {
			l = append(l, r.fetchCharts(ctx)...)
		}
		if !l.HasFatal() {
			l = append(l, r.fetchURLFiles(ctx)...)
		}
		if !l.HasFatal() && st == stage.Render {
			l = append(l, r.staleChartPins()...)
		}
		if !l.HasFatal() {
			r.stages = append(r.stages, st)
		}
		return l
	}}
}

// seed starts the model from the cluster's pools, once.
func (r *run) seed() {
	if r.model == nil {
		r.model = r.engine.Seed(r.plan)
	}
}

// renderInput is what render needs of the run with the model: the cluster (and
// its provider block, for the registered cloud template), the resolved order and every
// plugin's package files (its charts).
func (r *run) renderInput() render.Input {
	pkgs := map[string]fs.FS{}
	var cloudValues map[string]any
	for _, pl := range r.plan.Plugins {
		pkgs[pl.Package.Name] = pl.Package.FS
		if pl.Package.Name == CloudPlugin && pl.Values != nil {
			cloudValues = pl.Values.Cluster
		}
	}
	version := r.cluster.KubernetesVersion.String()
	var bootSecrets func(string) string
	if sr := provider.SpecRenderOf(r.cluster.Spec.Spec.Provider); sr.BootSecrets != nil {
		spec, name := r.cluster.Spec.Spec.Provider, r.cluster.Spec.Metadata.Name
		bootSecrets = func(pool string) string { return sr.BootSecrets(name, spec, pool) }
	}
	return render.Input{
		BootSecrets: bootSecrets,
		Cloud:       provider.CloudTemplateOf(),
		Provider:    r.cluster.Spec.Spec.Provider,
		CloudValues: cloudValues,
		ServedAPI:   servedAPI(version),
		Flag: func(component, name, value string) (string, bool) {
			return k8sversions.CheckFlag(version, component, name, value)
		},
		ClusterName:       r.cluster.Spec.Metadata.Name,
		KubernetesVersion: r.cluster.KubernetesVersion.String(),
		EtcdVersion:       k8sversions.Default().Etcd(r.cluster.KubernetesVersion.String()),
		Model:             r.model,
		Order:             r.plan.Names(),
		Charts:            func(name string) fs.FS { return pkgs[name] },
		RemoteChart:       r.remoteChart,
		ChartDependency:   r.chartDependency,
		URLFile:           r.urlFile,
	}
}

// servedAPI is render's Input.ServedAPI for Kubernetes version, from
// internal/k8sversions' table of deprecated and removed APIs.
func servedAPI(version string) func(apiVersion, kind string) (string, bool) {
	return func(apiVersion, kind string) (string, bool) {
		a, st := k8sversions.ServedAPI(version, apiVersion, kind)
		if st == k8sversions.Served {
			return "", false
		}
		return a.Message(version, st), st == k8sversions.Removed
	}
}

// through returns the steps that run the stages up to and including until.
func through(until stage.Stage) []step {
	var out []step
	for _, st := range stage.Stages {
		out = append(out, stageStep(st))
		if st == until {
			break
		}
	}
	return out
}
