package action

import (
	"context"
	"time"

	"github.com/kubeplug/kubeplug/pkg/check"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/state"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// DeployOptions say how apply and up deploy the plugins' Kubernetes content.
// Both actions embed them, and the CLI binds them once for both commands.
type DeployOptions struct {
	// Timeout bounds how long each plugin may take to become ready. Default 5m.
	Timeout time.Duration
	// ForceConflicts takes over fields other field managers own.
	ForceConflicts bool
	// ForceCRDChanges applies CustomResourceDefinition changes that would break
	// existing objects or clients, which are otherwise refused.
	ForceCRDChanges bool
	// RollbackOnFailure restores the previous revision of a plugin whose objects do
	// not become ready (its Helm releases too), or uninstalls it when it was new.
	RollbackOnFailure bool
	// AllowDowngrade applies plugin versions lower than the installed ones.
	AllowDowngrade bool
	// HistoryMax bounds the revisions recorded per plugin. Default 10.
	HistoryMax int
	// Lease says how the run takes the cluster's operation lease (not in a dry run).
	Lease Lease
	// Events receives progress.
	Events func(deploy.Event)
	// Owner is recorded as what manages the plugins the run installs
	// (deploy.Options.Owner): empty for the CLI. A run removes only plugins of
	// its own owner and refuses plugins another owner manages.
	Owner string
	// Adopt lets a run with an Owner take over the plugins the CLI installed
	// (deploy.Options.Adopt); without it they are refused, naming the CLI.
	Adopt bool
	// Remedies name how the run's user allows what a refusal refuses; zero
	// fields name the CLI's flags (deploy.Options.Remedies).
	Remedies deploy.Remedies
	// Client, when set, is the client of the target cluster to use (a
	// controller's, shared across its applies); one is made otherwise.
	Client *kube.Client
	// Heads, when set, is the target's release record heads shared across
	// runs (deploy.Options.Heads).
	Heads *state.Heads
}

// Apply runs every stage of a cluster spec against a running cluster: it deploys
// each wave's Kubernetes content, waits until it is ready before the next wave,
// prunes what plugins no longer produce and uninstalls plugins the spec no longer
// enables.
type Apply struct {
	cfg *Config
	// Target is the running cluster.
	Target KubeconfigTarget
	// StateDir is the local cluster's state directory, where the file's cluster
	// is looked for (see KubeconfigTarget.ForCluster); default as for Up.
	StateDir string
	// DryRun asks the API server to validate everything without persisting it.
	DryRun bool
	DeployOptions
}

// NewApply returns an Apply action.
func NewApply(cfg *Config) *Apply { return &Apply{cfg: cfg} }

// ApplyResult summarises an apply.
type ApplyResult struct {
	Plugins   []string      `json:"plugins"`
	Applied   int           `json:"applied"`
	Pruned    int           `json:"pruned"`
	Removed   []string      `json:"removed,omitempty"`
	Duration  time.Duration `json:"duration"`
	DryRun    bool          `json:"dryRun,omitempty"`
	Validated bool          `json:"validated"`
	// Checks are the plugins' validate checks, in wave order (none in a dry run).
	Checks []check.Result `json:"checks,omitempty"`
	// LockUpdated says how the kubeplug.lock beside the cluster file changed to
	// pin what was deployed (an existing lock file only; never with --locked).
	LockUpdated []string `json:"lockUpdated,omitempty"`
	// Newer names the plugins the lock file held back at their locked
	// versions, each with the version an update would take ("dex 1.5.0").
	Newer []string `json:"newer,omitempty"`
}

// Run applies cl: resolve, connect (failing before anything is rendered when the
// cluster cannot be reached), initialise, render, deploy, validate, record. The
// result is nil when the run stopped before connecting.
func (a *Apply) Run(ctx context.Context, cl *config.Cluster) (*ApplyResult, diag.List) {
	start := time.Now()
	r := a.cfg.newRun(cl, false)
	defer r.close()
	// Losing the operation lease cancels the whole run: another may have started.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.live = live{op: "apply", opts: a.DeployOptions, dryRun: a.DryRun, cancel: cancel}
	defer r.live.unlockLease()
	// The target first, since the machine facts of the file's own cluster
	// enter the values at resolve; its error only after resolve's, which say
	// what is wrong with the file.
	target, prov, terr := a.Target.forCluster(ctx, a.cfg, cl, a.StateDir)
	var l diag.List
	if terr == nil && prov != nil {
		l = machineFacts(cl, prov, false)
	}
	if l = append(l, r.pipeline(ctx, resolveStep)...); l.HasFatal() {
		l.Sort()
		return nil, l
	}
	if terr != nil {
		l.Errorf("", 0, 0, "", "%v", terr)
		l.Sort()
		return nil, l
	}
	rc, err := target.Config()
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		l.Sort()
		return nil, l
	}
	r.live.rest = rc
	if !target.Explicit() {
		r.live.currentContext = target.ContextName()
		if r.live.currentContext == "" {
			r.live.currentContext = "(unnamed)"
		}
	}
	if l = append(l, r.pipeline(ctx, connectStep)...); l.HasFatal() {
		l.Sort()
		return nil, l
	}
	res := &ApplyResult{Plugins: r.plan.Names(), DryRun: a.DryRun}
	r.live.res = res
	l = append(l, r.pipeline(ctx, stageStep(stage.Initialise), stageStep(stage.Render), deployStep, validateStep, recordStep)...)
	l.Sort()
	res.Duration = time.Since(start).Round(time.Millisecond)
	return res, l
}
