package action

import (
	"context"
	"log/slog"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/runtime"
)

// prepared is a cluster file resolved into a plan.
type prepared struct {
	cluster *config.Cluster
	engine  *engine.Engine
	plan    *engine.Plan
	// runtimes are the plugin processes the run starts; close ends them.
	runtimes *runtime.Set
	log      *slog.Logger
}

// close stops every plugin process the run started. Call it when the engine run
// ends.
func (p *prepared) close() {
	if err := p.runtimes.Close(); err != nil {
		p.log.Warn("stopping plugin processes", "error", err)
	}
}

// prepare loads the cluster file and its sources and resolves the plan. redact makes
// the engine render with sensitive values hidden (for files and reports).
func (c *Config) prepare(ctx context.Context, file string, redact bool) (*prepared, diag.List) {
	cl, l := config.Load(file)
	if cl == nil {
		return nil, l
	}
	idx, il := c.LoadIndex(ctx, cl.Sources()...)
	l = append(l, il...)
	if l.HasFatal() {
		return nil, l
	}
	rs := runtime.NewSet(runtime.Options{Logger: c.logger(), Timeout: c.PluginTimeout})
	e := engine.New(engine.Options{Logger: c.logger(), Env: c.env(), Redact: redact, Runtimes: c.Runtimes, CodeRuntime: rs.Runtime})
	plan, pl := e.Plan(ctx, cl, idx)
	l = append(l, pl...)
	if plan == nil {
		_ = rs.Close() // nothing has run yet
		return nil, l
	}
	return &prepared{cluster: cl, engine: e, plan: plan, runtimes: rs, log: c.logger()}, l
}

// Plan resolves a cluster file and runs the initialise stage to show which plugins
// run, in which waves, and what each contributes.
type Plan struct {
	cfg *Config
}

// NewPlan returns a Plan action.
func NewPlan(cfg *Config) *Plan { return &Plan{cfg: cfg} }

// Run plans the cluster file at path.
func (a *Plan) Run(ctx context.Context, path string) (*engine.PlanDoc, diag.List) {
	p, l := a.cfg.prepare(ctx, path, true)
	if p == nil {
		return nil, l
	}
	defer p.close()
	res, rl := p.engine.Run(ctx, p.plan, engine.Initialise)
	l = append(l, rl...)
	l.Sort()
	if l.HasFatal() {
		return nil, l
	}
	return p.plan.Doc(res.Model), l
}
