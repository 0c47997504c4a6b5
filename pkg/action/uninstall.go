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
// removed even when something failed.
func (a *Uninstall) Run(ctx context.Context, plugins ...string) (*UninstallResult, diag.List) {
	res := &UninstallResult{Removed: []string{}, DryRun: a.DryRun}
	var l diag.List
	target, prov, err := a.Target.forCluster(ctx, a.cfg, a.Cluster, a.StateDir)
	own := prov != nil
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return res, l
	}
	d, err := connect(ctx, a.cfg, target, deploy.Options{Events: a.Events, DryRun: a.DryRun, Owner: a.Owner, AnyOwner: a.All})
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return res, l
	}
	ctx, unlock, err := a.Lease.lock(ctx, d, "uninstall", a.cfg.logger())
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return res, l
	}
	defer unlock()
	invs, err := d.Inventories(ctx)
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return res, l
	}
	installed := map[string]bool{}
	for _, inv := range invs {
		installed[inv.Plugin] = true
		if a.All {
			plugins = append(plugins, inv.Plugin)
		}
	}
	if a.All && len(plugins) == 0 {
		return res, l
	}
	for _, p := range plugins {
		if !installed[p] {
			l.Errorf("", 0, 0, "", "plugin %s is not installed in this cluster%s", p, suggest.Hint(suggest.Closest(p, pluginNames(invs))))
		}
	}
	if l.HasFatal() {
		return res, l
	}
	// On the file's own cluster, the machines follow: checked and rendered
	// before anything changes, brought there once the objects are gone.
	recs := records(invs)
	gone := dependents(invs, plugins, a.Cascade)
	stays := map[string][]string{}
	for _, p := range gone {
		if rec := recs[p]; rec != nil && len(rec.Machine) > 0 {
			stays[p] = rec.Machine
		}
	}
	var m *machines
	var why []string
	if own && !a.All && len(stays) > 0 {
		want := maps.Clone(recs)
		for _, p := range gone {
			delete(want, p)
		}
		m, why = a.cfg.prepareMachines(ctx, a.Cluster.Without(gone...), a.StateDir, a.ProviderEvents, want)
		if m != nil {
			defer m.close()
		}
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
	switch {
	case m != nil && err == nil && slices.Equal(slices.Sorted(slices.Values(done)), gone):
		if a.DryRun {
			res.Machines = &MachinesResult{Cluster: a.Cluster.Spec.Metadata.Name}
			break
		}
		mr, ml := m.provision(ctx)
		l = append(l, ml...)
		if ml.HasFatal() {
			notReconciled(&l, mr.Cluster, "run `kubeplug up -f` with a cluster file that no longer enables them", stays)
			break
		}
		res.Machines = mr
	case m != nil:
		// Not everything went: reconciling would take away the contributions
		// of plugins whose objects are still there.
		for _, p := range done {
			leftBehind(&l, p, "uninstall", stays[p], []string{"not every plugin was uninstalled"})
		}
	default:
		for _, p := range done {
			leftBehind(&l, p, "uninstall", stays[p], why)
		}
	}
	return res, l
}
