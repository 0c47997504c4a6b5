package action

import (
	"context"
	"errors"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// EtcdSnapshot writes a snapshot of a running cluster's etcd through its
// provider (provider.EtcdSnapshotter); `kubeplug up --restore-from` brings a
// cluster back from it.
type EtcdSnapshot struct {
	cfg *Config
	// StateDir as for Up.
	StateDir string
	// Output is the file to write (required).
	Output string
	// ProviderEvents receives the provider's progress.
	ProviderEvents func(provider.Event)
}

// NewEtcdSnapshot returns an EtcdSnapshot action.
func NewEtcdSnapshot(cfg *Config) *EtcdSnapshot { return &EtcdSnapshot{cfg: cfg} }

// Run writes the snapshot of the running cluster of cl to a.Output.
func (a *EtcdSnapshot) Run(ctx context.Context, cl *config.Cluster) (*provider.EtcdSnapshot, diag.List) {
	var l diag.List
	name := cl.Spec.Metadata.Name
	if a.Output == "" {
		l.Errorf("", 0, 0, "", "no output file: give one with --to FILE")
		return nil, l
	}
	prov, err := provider.New(provider.Config{ClusterName: name, Spec: cl.Spec.Spec.Provider, StateDir: a.StateDir, Events: a.ProviderEvents, Logger: a.cfg.logger()})
	if err != nil {
		cl.Errorf(&l, "/spec/provider", "%v", err)
		return nil, l
	}
	snap, ok := prov.(provider.EtcdSnapshotter)
	if !ok {
		cl.Errorf(&l, "/spec/provider", "the %s provider cannot snapshot a cluster's etcd", providerName(cl))
		return nil, l
	}
	res, err := snap.SnapshotEtcd(ctx, a.Output)
	if errors.Is(err, provider.ErrNotRunning) {
		l.Errorf("", 0, 0, "", "%v: nothing to snapshot; start it with kubeplug up -f %s", err, cl.File)
		return nil, l
	}
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	return res, l
}
