package action

import (
	"context"
	"slices"

	"github.com/kubeplug/kubeplug/internal/suggest"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

// Status reports the plugins installed in a cluster, from their inventories.
type Status struct {
	cfg *Config
	// Target is the running cluster.
	Target KubeconfigTarget
	// StateDir is where Report looks for the file's local cluster (see
	// KubeconfigTarget.ForCluster).
	StateDir string
}

// NewStatus returns a Status action.
func NewStatus(cfg *Config) *Status { return &Status{cfg: cfg} }

// Run returns every installed plugin with its version and how many of its objects
// exist and are ready.
func (a *Status) Run(ctx context.Context) ([]deploy.PluginStatus, diag.List) {
	var l diag.List
	d, err := connect(ctx, a.cfg, a.Target, deploy.Options{})
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	st, err := d.Status(ctx)
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	return st, l
}

// Uninstall removes plugins from a cluster, dependents first.
type Uninstall struct {
	cfg *Config
	// Target is the running cluster.
	Target KubeconfigTarget
	// Cascade removes the installed plugins that require the named ones too.
	Cascade bool
	// All uninstalls every installed plugin, dependents first (kubeplug down).
	All bool
	// DryRun has the API server check every delete without persisting it; the
	// release records stay.
	DryRun bool
	// Lease says how the run takes the cluster's operation lease.
	Lease  Lease
	Events func(deploy.Event)
	// Owner is the run's owner (DeployOptions.Owner): plugins another owner
	// manages are refused, except with All.
	Owner string
}

// NewUninstall returns an Uninstall action.
func NewUninstall(cfg *Config) *Uninstall { return &Uninstall{cfg: cfg} }

// Run uninstalls the named plugins and returns those removed, in order.
func (a *Uninstall) Run(ctx context.Context, plugins ...string) ([]string, diag.List) {
	var l diag.List
	d, err := connect(ctx, a.cfg, a.Target, deploy.Options{Events: a.Events, DryRun: a.DryRun, Owner: a.Owner, AnyOwner: a.All})
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	ctx, unlock, err := a.Lease.lock(ctx, d, "uninstall", a.cfg.logger())
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
	installed := map[string]bool{}
	for _, inv := range invs {
		installed[inv.Plugin] = true
		if a.All {
			plugins = append(plugins, inv.Plugin)
		}
	}
	if a.All && len(plugins) == 0 {
		return nil, l
	}
	for _, p := range plugins {
		if !installed[p] {
			l.Errorf("", 0, 0, "", "plugin %s is not installed in this cluster%s", p, suggest.Hint(suggest.Closest(p, pluginNames(invs))))
		}
	}
	if l.HasFatal() {
		return nil, l
	}
	done, err := d.Uninstall(ctx, plugins, a.Cascade)
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
	}
	if !a.All { // down stops the machines too
		for _, inv := range invs {
			if slices.Contains(done, inv.Plugin) {
				leftBehind(&l, inv.Plugin, "uninstall", inv.Machine)
			}
		}
	}
	return done, l
}
