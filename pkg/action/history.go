package action

import (
	"context"
	"fmt"

	"github.com/kubeplug/kubeplug/internal/suggest"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

// History lists a plugin's recorded revisions in a cluster, from its release
// records alone: the plugin need not be in any catalog.
type History struct {
	cfg *Config
	// Target is the running cluster.
	Target KubeconfigTarget
}

// NewHistory returns a History action.
func NewHistory(cfg *Config) *History { return &History{cfg: cfg} }

// Run returns the plugin's revisions, oldest first.
func (a *History) Run(ctx context.Context, plugin string) ([]deploy.Revision, diag.List) {
	var l diag.List
	d, err := connect(ctx, a.cfg, a.Target, deploy.Options{})
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	h, err := d.History(ctx, plugin)
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	if len(h) == 0 {
		l.Errorf("", 0, 0, "", "plugin %s is not installed in this cluster (it has no release record)%s", plugin, installedHint(ctx, d, plugin))
		return nil, l
	}
	return h, l
}

// installedHint suggests the installed plugins whose names are closest to
// plugin, which is not installed (see suggest.Hint); empty when none is close
// or the release records cannot be listed.
func installedHint(ctx context.Context, d *deploy.Deployer, plugin string) string {
	invs, err := d.Inventories(ctx)
	if err != nil {
		return ""
	}
	return suggest.Hint(suggest.Closest(plugin, pluginNames(invs)))
}

// pluginNames are the names of the plugins records are of.
func pluginNames(recs []*deploy.Record) []string {
	names := make([]string, 0, len(recs))
	for _, r := range recs {
		names = append(names, r.Plugin)
	}
	return names
}

// connect returns a deployer for the cluster once its API server answers.
func connect(ctx context.Context, cfg *Config, c KubeconfigTarget, opts deploy.Options) (*deploy.Deployer, error) {
	rc, err := c.Config()
	if err != nil {
		return nil, err
	}
	opts.Logger = cfg.logger()
	d, err := deploy.New(rc, opts)
	if err == nil {
		err = d.Ping(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot reach the cluster: %w", err)
	}
	for _, p := range d.DiscoveryProblems() {
		// An aggregated API that is down: everything else still works.
		cfg.logger().Warn("API discovery is incomplete; going on without it", "groupVersion", p)
	}
	return d, nil
}
