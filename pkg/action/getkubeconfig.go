package action

import (
	"context"
	"errors"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// GetKubeconfig finds the kubeconfig of a cluster its provider brought up.
type GetKubeconfig struct {
	cfg *Config
	// StateDir as for Up.
	StateDir string
}

// NewGetKubeconfig returns a GetKubeconfig action.
func NewGetKubeconfig(cfg *Config) *GetKubeconfig { return &GetKubeconfig{cfg: cfg} }

// Run returns the path of the kubeconfig of the running cluster of cl.
func (a *GetKubeconfig) Run(ctx context.Context, cl *config.Cluster) (string, diag.List) {
	var l diag.List
	name := cl.Spec.Metadata.Name
	prov, err := provider.New(provider.Config{ClusterName: name, Spec: cl.Spec.Spec.Provider, StateDir: a.StateDir, Logger: a.cfg.logger()})
	if err != nil {
		cl.Errorf(&l, "/spec/provider", "%v", err)
		return "", l
	}
	loc, ok := prov.(provider.Locator)
	if !ok {
		cl.Errorf(&l, "/spec/provider", "the cluster's provider cannot locate a running cluster")
		return "", l
	}
	kubeconfig, err := loc.Locate(ctx)
	if errors.Is(err, provider.ErrNotRunning) {
		where := ""
		if s, ok := prov.(provider.Stateful); ok {
			where = " (state dir " + s.StateDir() + ")"
		}
		l.Errorf("", 0, 0, "", "cluster %s is not running%s: start it with kubeplug up -f %s", name, where, cl.File)
		return "", l
	}
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return "", l
	}
	return kubeconfig, l
}
