package action

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/local"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// Up brings a whole cluster to its cluster file: the provider brings the control
// plane (with the flags, feature gates and volumes plugins contributed) and the node
// pools (their machines run the plugins' hooks and receive their files and units),
// then every plugin's Kubernetes content is deployed wave by wave, the machines run
// their after-deploy hooks, and every plugin's checks validate the result. Up on a
// running cluster applies the difference.
type Up struct {
	// Apply carries the deploy settings (timeout, rollback, progress events, ...).
	// Its Cluster is ignored: the provider says where the cluster is.
	Apply *Apply
	// StateDir holds the local cluster's state. Default local.DefaultStateDir(name).
	StateDir string
	// ProviderEvents receives the provider's progress.
	ProviderEvents func(provider.Event)
}

// NewUp returns an Up action.
func NewUp(cfg *Config) *Up { return &Up{Apply: NewApply(cfg)} }

// UpResult summarises an up.
type UpResult struct {
	*ApplyResult
	Cluster    string `json:"cluster"`
	StateDir   string `json:"stateDir"`
	Kubeconfig string `json:"kubeconfig"`
	// Context is the context added to the user's kubeconfig, when one was.
	Context   string                `json:"context,omitempty"`
	Nodes     []provider.NodeStatus `json:"nodes,omitempty"`
	Restarted []string              `json:"restarted,omitempty"`
	// Versions are the plugins' versions, by name.
	Versions map[string]string `json:"versions"`
	// Contributed counts, per plugin, the constructs it contributed by kind.
	Contributed map[string]map[string]int `json:"contributed"`
	// Ready is the time from the start of up until the validate stage passed.
	Ready time.Duration `json:"ready"`
}

// Run brings the cluster of the file at path up.
func (u *Up) Run(ctx context.Context, path string) (*UpResult, diag.List) {
	start := time.Now()
	res := &UpResult{Versions: map[string]string{}, Contributed: map[string]map[string]int{}}
	var prov *local.Provider
	lc := lifecycle{
		// The provider is chosen, checks the Kubernetes version and gives the
		// control-plane plugin its machine facts before anything resolves.
		loaded: func(ctx context.Context, cl *config.Cluster) diag.List {
			var l diag.List
			spec := cl.Spec
			res.Cluster = spec.Metadata.Name
			if pr := spec.Spec.Provider; pr != nil && pr.Local == nil {
				cl.Errorf(&l, "/spec/provider", "kubeplug up knows the local provider only")
				return l
			}
			opts := local.Options{StateDir: u.StateDir, ClusterName: res.Cluster, Events: u.ProviderEvents, Logger: u.Apply.cfg.logger()}
			if pr := spec.Spec.Provider; pr != nil && pr.Local != nil {
				opts.APIServerPort = pr.Local.APIServerPort
			}
			var err error
			if opts.StateDir, err = stateDir(u.StateDir, res.Cluster); err != nil {
				l.Errorf("", 0, 0, "", "%v", err)
				return l
			}
			res.StateDir = opts.StateDir
			if prov, err = local.New(opts); err != nil {
				l.Errorf("", 0, 0, "", "%v", err)
				return l
			}
			if err := prov.CheckKubernetesVersion(cl.KubernetesVersion.String()); err != nil {
				cl.Errorf(&l, "/spec/kubernetesVersion", "%v", err)
				return l
			}
			return append(l, machineFacts(cl, prov)...)
		},
		bringUp: func(ctx context.Context, p *prepared, m *model.Model) (*rest.Config, diag.List) {
			var l diag.List
			doc := p.plan.Doc(m)
			for _, pl := range doc.Plugins {
				res.Versions[pl.Name] = pl.Version
			}
			for _, c := range doc.Contributions {
				if res.Contributed[c.Plugin] == nil {
					res.Contributed[c.Plugin] = map[string]int{}
				}
				res.Contributed[c.Plugin][c.Kind]++
			}
			in := p.renderInput(m)
			machines, ml := render.Machines(ctx, in)
			l = append(l, ml...)
			if ml.HasFatal() {
				return nil, l
			}
			cl, err := prov.Up(ctx, &provider.Desired{ClusterName: res.Cluster, KubernetesVersion: in.KubernetesVersion, Model: m, Machines: machines})
			if cl != nil {
				// Valid with a node's failure too: the control plane runs.
				res.Kubeconfig, res.Nodes, res.Restarted = cl.Kubeconfig, cl.Nodes, cl.Restarted
			}
			if err != nil {
				if ctx.Err() != nil {
					l.Errorf("", 0, 0, "", "interrupted while bringing the cluster up; run kubeplug up again to continue (%v)", err)
					return nil, l
				}
				l.Errorf("", 0, 0, "", "bring the cluster up: %v", err)
				return nil, l
			}
			res.Kubeconfig, res.Nodes, res.Restarted = cl.Kubeconfig, cl.Nodes, cl.Restarted
			return cl.RESTConfig, l
		},
		afterDeploy: func(ctx context.Context) diag.List {
			var l diag.List
			if err := prov.AfterDeploy(ctx); err != nil {
				l.Errorf("", 0, 0, "", "after deploy: %v", err)
			}
			return l
		},
	}
	ar, l := u.Apply.run(ctx, path, lc)
	res.ApplyResult = ar
	res.Ready = time.Since(start).Round(100 * time.Millisecond)
	if ar == nil && res.Cluster == "" {
		return nil, l
	}
	return res, l
}

// CorePlugin is the built-in plugin the control plane's flags come from.
const CorePlugin = "control-plane"

// machineFacts sets the control-plane plugin's "machine" value to the local
// provider's facts (address, ports, certificate paths), so that its flags and
// the static Pods rendered from them are the command lines the provider runs.
// The local provider has no other source of the control plane's flags, so a
// cluster file that does not enable the plugin is refused.
func machineFacts(cl *config.Cluster, prov *local.Provider) diag.List {
	var l diag.List
	i := slices.IndexFunc(cl.Enabled(), func(r v1alpha1.PluginRef) bool { return r.Name == CorePlugin })
	if i < 0 {
		cl.Errorf(&l, "/spec/plugins", "the local provider runs the control plane with the flags of the built-in %s plugin: enable it (spec.plugins.enabled: [{name: %s}])", CorePlugin, CorePlugin)
		return l
	}
	facts, err := prov.Facts()
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return l
	}
	// As decoded from a file, so that the values schema sees JSON numbers.
	b, err := json.Marshal(facts)
	var machine map[string]any
	if err == nil {
		err = json.Unmarshal(b, &machine)
	}
	if err != nil {
		l.Errorf("", 0, 0, "", "encode the machine facts: %v", err)
		return l
	}
	ref := &cl.Spec.Spec.Plugins.Enabled[i]
	ref.Values = maps.Clone(ref.Values)
	if ref.Values == nil {
		ref.Values = v1alpha1.Values{}
	}
	ref.Values["machine"] = machine
	return l
}

// Down stops a local cluster: it uninstalls the plugins in reverse dependency order
// while the cluster runs, then stops the control plane and the nodes. It changes
// nothing outside the cluster's state directory.
type Down struct {
	cfg *Config
	// StateDir as for Up.
	StateDir string
	// Purge deletes the state directory too.
	Purge bool
	// KeepPlugins skips uninstalling the plugins (the cluster is thrown away anyway;
	// uninstalling runs their cleanup).
	KeepPlugins bool
	Uninstall   *Uninstall
}

// NewDown returns a Down action.
func NewDown(cfg *Config) *Down { return &Down{cfg: cfg, Uninstall: NewUninstall(cfg)} }

// DownResult summarises a down.
type DownResult struct {
	Cluster     string   `json:"cluster"`
	StateDir    string   `json:"stateDir"`
	Uninstalled []string `json:"uninstalled,omitempty"`
	Purged      bool     `json:"purged"`
}

// Run stops the cluster of the file at path.
func (a *Down) Run(ctx context.Context, path string) (*DownResult, diag.List) {
	name, l := clusterName(path)
	if name == "" {
		return nil, l
	}
	dir, err := stateDir(a.StateDir, name)
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	res := &DownResult{Cluster: name, StateDir: dir, Purged: a.Purge}
	prov, err := local.New(local.Options{StateDir: res.StateDir, ClusterName: name, Logger: a.cfg.logger()})
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	running, err := local.Running(res.StateDir)
	// An incompatible state dir is still purged.
	if err != nil && (!a.Purge || !errors.Is(err, provider.ErrIncompatibleState)) {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	if running && !a.KeepPlugins {
		a.Uninstall.Cluster = Cluster{Kubeconfig: local.Kubeconfig(res.StateDir)}
		a.Uninstall.All = true
		a.Uninstall.Cascade = true
		removed, ul := a.Uninstall.Run(ctx)
		l = append(l, ul...)
		res.Uninstalled = removed
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

// KubeconfigPath returns the kubeconfig of the local cluster of the file at path.
func KubeconfigPath(path, dir string) (string, diag.List) {
	name, l := clusterName(path)
	if name == "" {
		return "", l
	}
	dir, err := stateDir(dir, name)
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return "", l
	}
	running, err := local.Running(dir)
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return "", l
	}
	if !running {
		l.Errorf("", 0, 0, "", "cluster %s is not running (state dir %s): start it with kubeplug up -f %s", name, dir, path)
		return "", l
	}
	return local.Kubeconfig(dir), l
}

// stateDir returns dir, or the cluster's default state directory.
func stateDir(dir, cluster string) (string, error) {
	if dir != "" {
		return filepath.Abs(dir)
	}
	return local.DefaultStateDir(cluster)
}

// clusterName reads the cluster's name from its file: down and get-kubeconfig need
// nothing else, so they work even when a plugin the file enables is gone.
func clusterName(path string) (string, diag.List) {
	cl, l := config.Load(path)
	if cl == nil {
		return "", l
	}
	return cl.Spec.Metadata.Name, l
}
