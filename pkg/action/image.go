package action

import (
	"context"
	"errors"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// LoadImage puts image archives into the registry of a cluster its provider runs
// (kubeplug image load).
type LoadImage struct {
	cfg *Config
	// StateDir as for Up.
	StateDir string
	// ProviderEvents receives the provider's progress: each push, its bytes.
	ProviderEvents func(provider.Event)
}

// NewLoadImage returns a LoadImage action.
func NewLoadImage(cfg *Config) *LoadImage { return &LoadImage{cfg: cfg} }

// Run loads every archive in paths, in order, and returns the image names pushed.
// It stops at the first archive that fails, naming it.
func (a *LoadImage) Run(ctx context.Context, cl *config.Cluster, paths []string) ([]string, diag.List) {
	var l diag.List
	name := cl.Spec.Metadata.Name
	prov, err := provider.New(provider.Config{ClusterName: name, Spec: cl.Spec.Spec.Provider, StateDir: a.StateDir, Events: a.ProviderEvents, Logger: a.cfg.logger()})
	if err != nil {
		cl.Errorf(&l, "/spec/provider", "%v", err)
		return nil, l
	}
	loader, ok := prov.(provider.ImageLoader)
	if !ok {
		cl.Errorf(&l, "/spec/provider", "the cluster's provider runs no registry to load images into; push them to a registry its nodes pull from")
		return nil, l
	}
	var pushed []string
	for _, p := range paths {
		names, err := loader.LoadImage(ctx, p)
		pushed = append(pushed, names...)
		if errors.Is(err, provider.ErrNotRunning) {
			l.Errorf("", 0, 0, "", "cluster %s is not running: start it with kubeplug up -f %s", name, cl.File)
			return pushed, l
		}
		if err != nil {
			l.Errorf(p, 0, 0, "", "%v", err)
			return pushed, l
		}
	}
	return pushed, l
}
