package local

import (
	"context"
	"fmt"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/stage"

	"github.com/kubeplug/kubeplug/pkg/provider"
)

// Name is the local provider's name in the registry and in spec.provider.
const Name = "local"

func init() {
	provider.RegisterFacts(Name, facts)
	provider.Register(Name, func(cfg provider.Config) (provider.Provider, error) {
		opts := Options{StateDir: cfg.StateDir, ClusterName: cfg.ClusterName, Events: cfg.Events, Logger: cfg.Logger}
		if cfg.Spec != nil && cfg.Spec.Local != nil {
			opts.APIServerPort = cfg.Spec.Local.APIServerPort
			opts.RealPools = cfg.Spec.Local.RealPools
			opts.MachinePools = cfg.Spec.Local.MachinePools
		}
		for _, o := range cfg.Options {
			switch o := o.(type) {
			case BuildFromSource:
				opts.BuildFromSource = true
			case RestoreFrom:
				opts.RestoreFrom, opts.RestoreForce = o.File, o.Force
			}
		}
		return New(opts)
	})
}

// BuildFromSource is the provider.Option of Options.BuildFromSource (up's
// --build-from-source).
type BuildFromSource struct{}

// Provider implements provider.Option.
func (BuildFromSource) Provider() string { return Name }

func (BuildFromSource) String() string { return "--build-from-source" }

// RestoreFrom is the provider.Option of Options.RestoreFrom and
// Options.RestoreForce (up's --restore-from and --force).
type RestoreFrom struct {
	File  string
	Force bool
}

// Provider implements provider.Option.
func (RestoreFrom) Provider() string { return Name }

func (r RestoreFrom) String() string { return "--restore-from" }

var (
	_ provider.Locator  = (*Provider)(nil)
	_ provider.Stateful = (*Provider)(nil)
)

// Locate returns the kubeconfig of the cluster of the state dir while it runs.
func (p *Provider) Locate(ctx context.Context) (string, error) {
	ok, err := Running(ctx, p.opts.StateDir)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("cluster %s (state dir %s): %w", p.opts.ClusterName, p.opts.StateDir, provider.ErrNotRunning)
	}
	return Kubeconfig(p.opts.StateDir), nil
}

var (
	_ provider.VersionChecker = (*Provider)(nil)
	_ provider.FactSource     = (*Provider)(nil)
)

// facts are the local provider's cluster facts: its control plane runs with the
// control-plane plugin's flags, so the API endpoint is that plugin's machine
// address and port (up sets them before the plan is made); its machines get the
// bridge CNI configuration and the control-plane Node its role label. The
// machines' network is chosen at up, so ClusterCIDR stays empty.
func facts(_ *v1alpha1.Cluster, values func(string) map[string]any, f *stage.Facts) {
	f.APIEndpoint = provider.ControlPlaneEndpoint(values)
	f.CNI = "bridge"
	f.NodeRoles[model.RoleControlPlane] = ControlPlaneRoleLabel
}
