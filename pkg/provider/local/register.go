package local

import (
	"context"
	"fmt"

	"github.com/kubeplug/kubeplug/pkg/provider"
)

// Name is the local provider's name in the registry and in spec.provider.
const Name = "local"

func init() {
	provider.RegisterSteps(Name, Steps())
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
