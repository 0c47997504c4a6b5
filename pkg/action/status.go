package action

import (
	"context"
	"fmt"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/lease"
)

// Status reports the plugins installed in a cluster, from their inventories.
type Status struct {
	cfg *Config
	// Target is the running cluster.
	Target KubeconfigTarget
	// StateDir is where Report looks for the file's local cluster (see
	// KubeconfigTarget.ForCluster).
	StateDir string
	// expect, set by Report, is the cluster file whose local cluster was never
	// started here: the current context stands for it only when the cluster
	// there was last applied a file of its name (lease.ClusterName).
	expect *config.Cluster
	// expectDir is that cluster's state directory, for the error.
	expectDir string
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
	if err := a.checkExpected(ctx, d); err != nil {
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

// checkExpected refuses to report the current context's plugins for a
// cluster file whose local cluster was never started (expect), unless the
// cluster there is the file's: the one its name was last applied to.
func (a *Status) checkExpected(ctx context.Context, d *deploy.Deployer) error {
	cl := a.expect
	if cl == nil {
		return nil
	}
	name := cl.Spec.Metadata.Name
	last, err := lease.ClusterName(ctx, d.Client(), d.Namespace())
	if err == nil && last == name {
		return nil
	}
	current := a.Target.ContextName()
	if current == "" {
		current = "(unnamed)"
	}
	what := "kubeplug never applied a cluster file there"
	if last != "" {
		what = "it is cluster " + last + ", the name of the last cluster file applied to it"
	}
	return fmt.Errorf("%s names local cluster %s, which is not running: it was never started here (no state dir %s), and the current context %s is not it (%s). "+
		"Start it with kubeplug up %s, or give --context or --kubeconfig to look at another cluster", cl.File, name, a.expectDir, current, what, cl.File)
}
