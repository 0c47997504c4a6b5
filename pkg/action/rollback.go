package action

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/kubeplug/kubeplug/internal/suggest"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// Rollback restores a recorded revision of an installed plugin: the objects that
// revision applied, its Helm releases at the revisions it recorded, and prunes what
// it did not have. It needs only the release records, not the plugin's package.
type Rollback struct {
	cfg *Config
	// Target is the running cluster.
	Target KubeconfigTarget
	// Revision to restore; 0 means the newest Ready revision before the current one.
	Revision int
	// Timeout bounds how long the plugin may take to become ready. Default 5m.
	Timeout time.Duration
	// ForceConflicts takes over fields other field managers own.
	ForceConflicts bool
	// HistoryMax bounds the revisions recorded per plugin. Default 10.
	HistoryMax int
	// DryRun has the API server check every object of the revision without
	// persisting anything; nothing is pruned, recorded or rolled back in Helm,
	// and Run returns the revision that would be restored.
	DryRun bool
	// Lease says how the run takes the cluster's operation lease.
	Lease  Lease
	Events func(deploy.Event)
	// Cluster, when set, is the cluster file (-f): its own cluster, when its
	// provider runs it on this machine, is the target unless Target names one
	// (KubeconfigTarget.ForCluster), and its machines are reconciled to the
	// file with the plugin pinned to the restored version — when the file's
	// values for the plugin are the revision's (see machines.go).
	Cluster *config.Cluster
	// StateDir is the local cluster's state directory, as for Up.
	StateDir string
	// ProviderEvents receives the provider's progress while it reconciles the
	// machines.
	ProviderEvents func(provider.Event)
}

// NewRollback returns a Rollback action.
func NewRollback(cfg *Config) *Rollback { return &Rollback{cfg: cfg} }

// Run rolls the plugin back and returns the revision it recorded. On the
// cluster file's own cluster, the machines are reconciled to the revision's
// version too, after its objects are restored; that is checked and rendered
// before anything changes.
func (a *Rollback) Run(ctx context.Context, plugin string) (*deploy.Record, diag.List) {
	var l diag.List
	target, prov, err := a.Target.forCluster(ctx, a.cfg, a.Cluster, a.StateDir)
	own := prov != nil
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	d, err := connect(ctx, a.cfg, target, deploy.Options{
		Events: a.Events, Timeout: a.Timeout, ForceConflicts: a.ForceConflicts, HistoryMax: a.HistoryMax, DryRun: a.DryRun,
	})
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	ctx, unlock, err := a.Lease.lock(ctx, d, "rollback "+plugin, a.cfg.logger())
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	defer unlock()
	invs, err := d.Inventories(ctx)
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	if names := pluginNames(invs); !slices.Contains(names, plugin) {
		l.Errorf("", 0, 0, "", "plugin %s is not installed in this cluster%s", plugin, suggest.Hint(suggest.Closest(plugin, names)))
		return nil, l
	}
	to, err := d.RollbackTarget(ctx, plugin, a.Revision)
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	recs := records(invs)
	cur := recs[plugin]
	var m *machines
	var why []string
	changed := machineChanges(cur, to)
	if own && (len(cur.Machine) > 0 || len(to.Machine) > 0) {
		want := maps.Clone(recs)
		want[plugin] = to
		m, why = a.cfg.prepareMachines(ctx, a.Cluster.Pinned(plugin, to.Version), a.StateDir, a.ProviderEvents, want)
		if m != nil {
			defer m.close()
		}
		if m == nil && len(changed) == 0 {
			// The same kinds of contributions, perhaps with other values: say
			// which may differ.
			changed = slices.Clone(cur.Machine)
		}
	}
	rec, err := d.Rollback(ctx, plugin, to.Revision)
	if err != nil {
		return nil, unitDiags(err)
	}
	a.reconcileMachines(ctx, &l, m, plugin, cur, to, changed, why)
	return rec, l
}

// machineChanges are what the machines keep of the current revision cur, or
// miss of the restored one to, unless they are reconciled.
func machineChanges(cur, to *deploy.Record) []string {
	var changed []string
	for _, m := range cur.Machine {
		if !slices.Contains(to.Machine, m) {
			changed = append(changed, m+" (not in the revision restored)")
		}
	}
	for _, m := range to.Machine {
		if !slices.Contains(cur.Machine, m) {
			changed = append(changed, m+" (only in the revision restored)")
		}
	}
	return changed
}

// reconcileMachines brings the machines m (nil when they are not this
// action's to reconcile) to the restored revision, unless this is a dry run;
// without m, it says what they keep or miss (changed), and why.
func (a *Rollback) reconcileMachines(ctx context.Context, l *diag.List, m *machines, plugin string, cur, to *deploy.Record, changed, why []string) {
	switch {
	case m != nil && a.DryRun:
	case m != nil:
		mr, ml := m.provision(ctx)
		*l = append(*l, ml...)
		if ml.HasFatal() {
			notReconciled(l, mr.Cluster, "run the rollback again", map[string][]string{plugin: slices.Compact(slices.Sorted(slices.Values(slices.Concat(cur.Machine, to.Machine))))})
		}
	default:
		leftBehind(l, plugin, "rollback", changed, why)
	}
}
