package action

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// Down stops a cluster its provider brought up: it uninstalls the plugins in
// reverse dependency order while the cluster runs, then has the provider stop the
// control plane and the nodes. The local provider changes nothing outside the
// cluster's state directory.
type Down struct {
	cfg *Config
	// StateDir as for Up.
	StateDir string
	// Purge deletes the cluster's state too.
	Purge bool
	// KeepPlugins skips uninstalling the plugins (the cluster is thrown away anyway;
	// uninstalling runs their cleanup).
	KeepPlugins bool
	// Uninstall removes the plugins; its Target is the running cluster's.
	Uninstall *Uninstall
	// ProviderEvents receives the provider's progress (the aws provider's stack
	// deletions).
	ProviderEvents func(provider.Event)
}

// NewDown returns a Down action.
func NewDown(cfg *Config) *Down { return &Down{cfg: cfg, Uninstall: NewUninstall(cfg)} }

// DownResult summarises a down.
type DownResult struct {
	Cluster     string   `json:"cluster"`
	StateDir    string   `json:"stateDir"`
	Uninstalled []string `json:"uninstalled,omitempty"`
	Purged      bool     `json:"purged"`
	// CA identifies the cluster's entries in the user's kubeconfig (read while
	// it ran; nil when it was not running).
	CA []byte `json:"-"`
}

// Run stops the cluster of cl. It reads only the spec's name and provider, so it
// works even when a plugin the spec enables is gone.
func (a *Down) Run(ctx context.Context, cl *config.Cluster) (*DownResult, diag.List) {
	var l diag.List
	name := cl.Spec.Metadata.Name
	prov, err := provider.New(provider.Config{ClusterName: name, Spec: cl.Spec.Spec.Provider, StateDir: a.StateDir, Events: a.ProviderEvents, Logger: a.cfg.logger()})
	if err != nil {
		cl.Errorf(&l, "/spec/provider", "%v", err)
		return nil, l
	}
	res := &DownResult{Cluster: name, Purged: a.Purge}
	if s, ok := prov.(provider.Stateful); ok {
		res.StateDir = s.StateDir()
		// Purging nothing is most likely a wrong -f or --state-dir: say so
		// rather than report a deletion that did not happen.
		if _, err := os.Stat(res.StateDir); a.Purge && res.StateDir != "" && errors.Is(err, fs.ErrNotExist) {
			l.Errorf("", 0, 0, "", "cluster %s has no state directory %s: nothing to purge (check -f and --state-dir)", name, res.StateDir)
			return nil, l
		}
	}
	// Like a second up, down waits up to --lock-timeout for a run that holds
	// the cluster on this machine (an up still bringing it up).
	if lk, ok := prov.(provider.Locker); ok {
		unlock, err := lk.Lock(ctx, "down", a.Uninstall.Lease.Wait, func(holder, op string, w time.Duration) {
			if a.ProviderEvents != nil {
				a.ProviderEvents(provider.Event{Time: time.Now(), Step: "lock", Message: fmt.Sprintf("waiting for the cluster's lock: %s by %s holds it (waited %s of up to %s, --lock-timeout)", op, holder, w.Round(time.Second), a.Uninstall.Lease.Wait)})
			}
		})
		if err != nil {
			l.Errorf("", 0, 0, "", "%v", err)
			return nil, l
		}
		defer unlock()
	}
	var kubeconfig string
	if loc, ok := prov.(provider.Locator); ok {
		kubeconfig, err = loc.Locate(ctx)
		switch {
		case err == nil, errors.Is(err, provider.ErrNotRunning):
		case a.Purge && errors.Is(err, provider.ErrIncompatibleState):
			// An incompatible state dir is still purged.
		default:
			l.Errorf("", 0, 0, "", "%v", err)
			return nil, l
		}
	}
	if kubeconfig != "" {
		res.CA = KubeconfigCA(kubeconfig)
	}
	if kubeconfig != "" && !a.KeepPlugins {
		a.Uninstall.Target = KubeconfigTarget{Kubeconfig: kubeconfig}
		a.Uninstall.All = true
		a.Uninstall.Cascade = true
		removed, ul := a.Uninstall.Run(ctx)
		l = append(l, ul...)
		res.Uninstalled = removed.Removed
		if ul.HasFatal() {
			return res, l
		}
	}
	if err := prov.Down(ctx, a.Purge); err != nil {
		if errors.Is(err, provider.ErrNotRunning) && a.Purge {
			return res, l
		}
		l.Errorf("", 0, 0, "", "%v", err)
		return res, l
	}
	return res, l
}
