package action

import (
	"context"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
)

// prepared is a cluster file resolved into a plan.
type prepared struct {
	cluster *config.Cluster
	engine  *engine.Engine
	plan    *engine.Plan
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
	e := engine.New(engine.Options{Logger: c.logger(), Env: c.env(), Redact: redact, Runtimes: c.Runtimes})
	plan, pl := e.Plan(ctx, cl, idx)
	l = append(l, pl...)
	if plan == nil {
		return nil, l
	}
	return &prepared{cluster: cl, engine: e, plan: plan}, l
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
	res, rl := p.engine.Run(ctx, p.plan, engine.Initialise)
	l = append(l, rl...)
	l.Sort()
	if l.HasFatal() {
		return nil, l
	}
	return p.plan.Doc(res.Model), l
}
