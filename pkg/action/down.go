package action

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

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
	// APIWait is how long Run waits for the running cluster's API server to
	// answer before it uninstalls the plugins (default 20s, NewDown): one
	// that does not (etcd's quorum lost, its control plane half gone) cannot
	// uninstall anything. Then Run refuses, naming --keep-plugins and
	// --purge; with Purge it warns and deletes the cluster anyway.
	APIWait time.Duration
	// ProviderEvents receives the provider's progress (the aws provider's stack
	// deletions).
	ProviderEvents func(provider.Event)
}

// NewDown returns a Down action.
func NewDown(cfg *Config) *Down {
	return &Down{cfg: cfg, Uninstall: NewUninstall(cfg), APIWait: 20 * time.Second}
}

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
	if err := a.checkPurge(prov, res, name); err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	unlock, err := a.lock(ctx, prov)
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	defer unlock()
	kubeconfig, err := a.locate(ctx, prov)
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	if kubeconfig != "" {
		res.CA = KubeconfigCA(kubeconfig)
	}
	if kubeconfig != "" && !a.KeepPlugins {
		if err := apiAnswers(ctx, kubeconfig, a.APIWait); err != nil {
			return a.noAPI(ctx, prov, res, l, name, err)
		}
		a.Uninstall.Target = KubeconfigTarget{Kubeconfig: kubeconfig}
		a.Uninstall.All = true
		a.Uninstall.Cascade = true
		removed, ul := a.Uninstall.Run(ctx)
		res.Uninstalled = removed.Removed
		if ul.HasFatal() {
			// An API server that answered at first and then stopped (its
			// etcd lost a moment before): the same as one that never did.
			if err := apiAnswers(ctx, kubeconfig, 0); err != nil && len(removed.Removed) == 0 {
				return a.noAPI(ctx, prov, res, l, name, err)
			}
			return res, append(l, ul...)
		}
		l = append(l, ul...)
	}
	return a.providerDown(ctx, prov, res, l)
}

// checkPurge records the provider's state directory in res, and refuses to
// purge one that does not exist: purging nothing is most likely a wrong -f or
// --state-dir, so say so rather than report a deletion that did not happen.
func (a *Down) checkPurge(prov provider.Provider, res *DownResult, name string) error {
	s, ok := prov.(provider.Stateful)
	if !ok {
		return nil
	}
	res.StateDir = s.StateDir()
	if _, err := os.Stat(res.StateDir); a.Purge && res.StateDir != "" && errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cluster %s has no state directory %s: nothing to purge (check -f and --state-dir)", name, res.StateDir)
	}
	return nil
}

// lock takes the cluster's lock on this machine, when the provider has one:
// like a second up, down waits up to --lock-timeout for a run that holds it
// (an up still bringing it up).
func (a *Down) lock(ctx context.Context, prov provider.Provider) (func(), error) {
	lk, ok := prov.(provider.Locker)
	if !ok {
		return func() {}, nil
	}
	return lk.Lock(ctx, "down", a.Uninstall.Lease.Wait, func(holder, op string, w time.Duration) {
		if a.ProviderEvents != nil {
			a.ProviderEvents(provider.Event{Time: time.Now(), Step: "lock", Message: fmt.Sprintf("waiting for the cluster's lock: %s by %s holds it (waited %s of up to %s, --lock-timeout)", op, holder, w.Round(time.Second), a.Uninstall.Lease.Wait)})
		}
	})
}

// locate is the running cluster's kubeconfig, "" when it is not running (or,
// purging, its state is incompatible: it is still purged).
func (a *Down) locate(ctx context.Context, prov provider.Provider) (string, error) {
	loc, ok := prov.(provider.Locator)
	if !ok {
		return "", nil
	}
	kubeconfig, err := loc.Locate(ctx)
	switch {
	case err == nil, errors.Is(err, provider.ErrNotRunning):
	case a.Purge && errors.Is(err, provider.ErrIncompatibleState):
		// An incompatible state dir is still purged.
	default:
		return "", err
	}
	return kubeconfig, nil
}

// noAPI is down of a running cluster whose API server does not answer (err):
// refused, naming the ways on, or with Purge deleted after a warning.
func (a *Down) noAPI(ctx context.Context, prov provider.Provider, res *DownResult, l diag.List, name string, err error) (*DownResult, diag.List) {
	if !a.Purge {
		l.Errorf("", 0, 0, "", "cluster %s runs, but no API server of it answers (%v): its plugins cannot be uninstalled, which goes through the API (etcd may have lost quorum: `kubeplug up` says). Nothing was stopped; `kubeplug down --keep-plugins` stops the cluster without uninstalling them, `kubeplug down --purge` deletes it", name, err)
		return nil, l
	}
	l.Warnf("", 0, 0, "", "cluster %s: no API server of it answers (%v), so its plugins are not uninstalled and their cleanup did not run; the cluster is deleted anyway (--purge)", name, err)
	return a.providerDown(ctx, prov, res, l)
}

// providerDown has the provider stop (and with Purge delete) the cluster.
func (a *Down) providerDown(ctx context.Context, prov provider.Provider, res *DownResult, l diag.List) (*DownResult, diag.List) {
	if err := prov.Down(ctx, a.Purge); err != nil {
		if errors.Is(err, provider.ErrNotRunning) && a.Purge {
			return res, l
		}
		l.Errorf("", 0, 0, "", "%v", err)
		return res, l
	}
	return res, l
}

// apiAnswers waits up to wait for the API server the kubeconfig names to
// answer /readyz with 200; the error is its last answer or failure.
func apiAnswers(ctx context.Context, kubeconfig string, wait time.Duration) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.Timeout = 5 * time.Second
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s/readyz: %s", cfg.Host, resp.Status)
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}
