package action

import (
	"context"
	"maps"
	"slices"

	"github.com/kubeplug/kubeplug/internal/suggest"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// Uninstall removes plugins from a cluster, dependents first. Given the
// cluster file of a cluster kubeplug brought up (Cluster, StateDir) and no
// explicit target, it works on that cluster and reconciles its machines too:
// the plugins' control-plane flags, node labels and taints, files and units go
// as well (see machines.go). Elsewhere it says which of those stay.
type Uninstall struct {
	cfg *Config
	// Target is the running cluster.
	Target KubeconfigTarget
	// Cluster, when set, is the cluster file (-f): its own cluster, when its
	// provider runs it on this machine, is the target unless Target names one
	// (KubeconfigTarget.ForCluster), and its machines are reconciled to the file
	// without the removed plugins (the file itself is not changed).
	Cluster *config.Cluster
	// StateDir is the local cluster's state directory, as for Up.
	StateDir string
	// Cascade removes the installed plugins that require the named ones too.
	Cascade bool
	// All uninstalls every installed plugin, dependents first (kubeplug down).
	All bool
	// DryRun has the API server check every delete without persisting it; the
	// release records stay, and the machines are not changed.
	DryRun bool
	// Lease says how the run takes the cluster's operation lease.
	Lease  Lease
	Events func(deploy.Event)
	// ProviderEvents receives the provider's progress while it reconciles the
	// machines.
	ProviderEvents func(provider.Event)
	// Owner is the run's owner (DeployOptions.Owner): plugins another owner
	// manages are refused, except with All.
	Owner string
}

// NewUninstall returns an Uninstall action.
func NewUninstall(cfg *Config) *Uninstall { return &Uninstall{cfg: cfg} }

// UninstallResult says what an uninstall did.
type UninstallResult struct {
	// Removed are the plugins removed, in order.
	Removed []string `json:"removed"`
	DryRun  bool     `json:"dryRun,omitempty"`
	// Machines says how the machines were reconciled (or, in a dry run, would
	// be); nil when they were not.
	Machines *MachinesResult `json:"machines,omitempty"`
}

// Run uninstalls the named plugins. The result is never nil: it lists what was
// removed even when something failed. Its steps: connect and take the lease,
// check the plugins are installed, prepare the machines (on the file's own
// cluster), uninstall, then bring the machines to what stays.
func (a *Uninstall) Run(ctx context.Context, plugins ...string) (*UninstallResult, diag.List) {
	res := &UninstallResult{Removed: []string{}, DryRun: a.DryRun}
	var l diag.List
	fail := func(err error) (*UninstallResult, diag.List) {
		l.Errorf("", 0, 0, "", "%v", err)
		return res, l
	}
	target, prov, err := a.Target.forCluster(ctx, a.cfg, a.Cluster, a.StateDir)
	if err != nil {
		return fail(err)
	}
	d, err := connect(ctx, a.cfg, target, deploy.Options{Events: a.Events, DryRun: a.DryRun, Owner: a.Owner, AnyOwner: a.All})
	if err != nil {
		return fail(err)
	}
	ctx, unlock, err := a.Lease.lock(ctx, d, "uninstall", a.cfg.logger())
	if err != nil {
		return fail(err)
	}
	defer unlock()
	invs, err := d.Inventories(ctx)
	if err != nil {
		return fail(err)
	}
	plugins = a.named(invs, plugins, &l)
	if l.HasFatal() || a.All && len(plugins) == 0 {
		return res, l
	}
	// On the file's own cluster, the machines follow: checked and rendered
	// before anything changes, brought there once the objects are gone.
	f := a.prepareFollow(ctx, prov != nil, invs, plugins)
	if f.m != nil {
		defer f.m.close()
	}
	done, err := d.Uninstall(ctx, plugins, a.Cascade)
	if done != nil {
		res.Removed = done
	}
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
	}
	if a.All { // down stops the machines too
		return res, l
	}
	a.follow(ctx, f, done, err == nil, res, &l)
	return res, l
}

// named is the plugins to uninstall: every installed one with All, else
// plugins, each of which must be installed (an error naming it, with the
// closest installed name, otherwise).
func (a *Uninstall) named(invs []*deploy.Record, plugins []string, l *diag.List) []string {
	installed := map[string]bool{}
	for _, inv := range invs {
		installed[inv.Plugin] = true
		if a.All {
			plugins = append(plugins, inv.Plugin)
		}
	}
	for _, p := range plugins {
		if !installed[p] {
			l.Errorf("", 0, 0, "", "plugin %s is not installed in this cluster%s", p, suggest.Hint(suggest.Closest(p, pluginNames(invs))))
		}
	}
	return plugins
}

// machineFollow is what the machines of the file's own cluster become once
// the plugins are gone: m is nil when they are not reconciled (why says why).
type machineFollow struct {
	m     *machines
	why   []string
	gone  []string            // the plugins removed, dependents included, sorted
	stays map[string][]string // by removed plugin, what it left on the machines
}

// prepareFollow checks and renders the machines without the removed plugins'
// contributions, before anything changes (own: the cluster is the file's).
func (a *Uninstall) prepareFollow(ctx context.Context, own bool, invs []*deploy.Record, plugins []string) machineFollow {
	recs := records(invs)
	f := machineFollow{gone: dependents(invs, plugins, a.Cascade), stays: map[string][]string{}}
	for _, p := range f.gone {
		if rec := recs[p]; rec != nil && len(rec.Machine) > 0 {
			f.stays[p] = rec.Machine
		}
	}
	if !own || a.All || len(f.stays) == 0 {
		return f
	}
	want := maps.Clone(recs)
	for _, p := range f.gone {
		delete(want, p)
	}
	f.m, f.why = a.cfg.prepareMachines(ctx, a.Cluster.Without(f.gone...), a.StateDir, a.ProviderEvents, want)
	return f
}

// follow brings the machines to what stays once every plugin of f.gone was
// uninstalled (ok, and done holds them all); otherwise it says what each
// removed plugin left on them.
func (a *Uninstall) follow(ctx context.Context, f machineFollow, done []string, ok bool, res *UninstallResult, l *diag.List) {
	switch {
	case f.m != nil && ok && slices.Equal(slices.Sorted(slices.Values(done)), f.gone):
		if a.DryRun {
			res.Machines = &MachinesResult{Cluster: a.Cluster.Spec.Metadata.Name}
			return
		}
		mr, ml := f.m.provision(ctx)
		*l = append(*l, ml...)
		if ml.HasFatal() {
			notReconciled(l, mr.Cluster, "run `kubeplug up -f` with a cluster file that no longer enables them", f.stays)
			return
		}
		res.Machines = mr
	case f.m != nil:
		// Not everything went: reconciling would take away the contributions
		// of plugins whose objects are still there.
		for _, p := range done {
			leftBehind(l, p, "uninstall", f.stays[p], []string{"not every plugin was uninstalled"})
		}
	default:
		for _, p := range done {
			leftBehind(l, p, "uninstall", f.stays[p], f.why)
		}
	}
}
