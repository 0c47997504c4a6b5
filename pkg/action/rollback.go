package action

import (
	"context"
	"slices"
	"time"

	"github.com/kubeplug/kubeplug/internal/suggest"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
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
}

// NewRollback returns a Rollback action.
func NewRollback(cfg *Config) *Rollback { return &Rollback{cfg: cfg} }

// Run rolls the plugin back and returns the revision it recorded.
func (a *Rollback) Run(ctx context.Context, plugin string) (*deploy.Record, diag.List) {
	var l diag.List
	d, err := connect(ctx, a.cfg, a.Target, deploy.Options{
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
	rec, err := d.Rollback(ctx, plugin, a.Revision)
	if err != nil {
		return nil, unitDiags(err)
	}
	for _, inv := range invs {
		if inv.Plugin == plugin && !slices.Equal(inv.Machine, rec.Machine) {
			var changed []string
			for _, m := range inv.Machine {
				if !slices.Contains(rec.Machine, m) {
					changed = append(changed, m+" (not in the revision restored)")
				}
			}
			for _, m := range rec.Machine {
				if !slices.Contains(inv.Machine, m) {
					changed = append(changed, m+" (only in the revision restored)")
				}
			}
			leftBehind(&l, plugin, "rollback", changed)
		}
	}
	return rec, l
}
