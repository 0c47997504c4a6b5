package local

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/kubeplug/kubeplug/pkg/provider"
)

// Options configure the local provider. ClusterName is required; every other
// field documents its default.
type Options struct {
	// StateDir holds everything of the cluster: the control plane's data,
	// certificates, kubeconfig and logs, and one machine directory per node.
	// Default: DefaultStateDir(ClusterName).
	StateDir string
	// ClusterName names the cluster.
	ClusterName string
	// APIServerPort is the API server's port on 127.0.0.1 (cluster.yaml's
	// spec.provider.local.apiServerPort). Default 0: the port recorded when the
	// cluster was first created, else a free one.
	APIServerPort int
	// Events receives progress; default none.
	Events func(provider.Event)
	// Logger receives diagnostics; default discards.
	Logger *slog.Logger
	// BinDir holds the local control plane's binaries; it must be of the
	// cluster's Kubernetes version. Default: found as versions.go's
	// resolveBinDir says (the binary cache, the binaries built from Go modules,
	// a download).
	BinDir string
	// CacheDir is the per-version binary cache. Default: see k8sversions.Cache.
	CacheDir string
	// BuildFromSource skips the binary cache and the download: only binaries
	// built from Go modules (make localcluster) run. Default: false, or true
	// when $KUBEPLUG_K8S_BUILD_FROM_SOURCE is set.
	BuildFromSource bool
	// Parallel bounds how many nodes are brought up at once. Default 4.
	Parallel int
	// RealPools names the pools whose nodes are real (spec.provider.local.realPools):
	// a kubelet, containerd and kube-proxy on this machine (package
	// pkg/provider/local/realnode). The other pools' nodes are simulated (kwok).
	RealPools []string
	// MachinePools names the pools whose nodes are systemd machines
	// (spec.provider.local.machinePools): each boots the machine image from
	// its pool's rendered cloud-init and joins by TLS bootstrap (machines.go).
	MachinePools []string
	// MachineImageDir holds the machine image (make machine-image). Default:
	// $KUBEPLUG_MACHINE_IMAGE, else machine/ beside localnode/.
	MachineImageDir string
	// NodeBinDir holds containerd, its shim, pause and kubeplug-registry (make
	// localnode). Default: $KUBEPLUG_LOCALNODE_BIN, else localnode/bin beside
	// the control plane's bin directory.
	NodeBinDir string
	// StopGracePeriod is how long each component gets to exit after SIGTERM.
	// Default: the control plane's default.
	StopGracePeriod time.Duration
	// RestoreFrom is an etcd snapshot file (Snapshot) Up brings the cluster
	// back from (up's --restore-from): etcd's data is made from it before the
	// control plane starts. Empty: none.
	RestoreFrom string
	// RestoreForce lets RestoreFrom replace the etcd data of a cluster that
	// exists in the state directory, running or stopped (up's --force); its
	// old data is kept aside.
	RestoreForce bool
}

// DefaultStateDir is $XDG_STATE_HOME/kubeplug/clusters/<name>, else
// ~/.local/state/kubeplug/clusters/<name>.
func DefaultStateDir(clusterName string) (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("default state directory: %w", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "kubeplug", "clusters", clusterName), nil
}

func (o Options) withDefaults() (Options, error) {
	if o.ClusterName == "" {
		return o, errors.New("local provider: no cluster name")
	}
	if o.StateDir == "" {
		dir, err := DefaultStateDir(o.ClusterName)
		if err != nil {
			return o, err
		}
		o.StateDir = dir
	}
	dir, err := filepath.Abs(o.StateDir)
	if err != nil {
		return o, fmt.Errorf("state directory %q: %w", o.StateDir, err)
	}
	o.StateDir = dir
	if o.APIServerPort < 0 || o.APIServerPort > 65535 {
		return o, fmt.Errorf("local provider: apiServerPort %d out of range 1-65535", o.APIServerPort)
	}
	if o.Events == nil {
		o.Events = func(provider.Event) {}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	return o, nil
}
