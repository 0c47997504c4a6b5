package action

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// KubeconfigTarget says which running cluster to talk to, as kubectl does: the
// target of every action that works on a cluster it did not bring up itself
// (apply, status, diff --live, uninstall, history, rollback). Up and down get
// their cluster from the provider instead.
type KubeconfigTarget struct {
	// Kubeconfig is a kubeconfig file; empty means $KUBECONFIG or ~/.kube/config.
	Kubeconfig string
	// Context is a context in it; empty means its current context.
	Context string
	// RESTConfig, when set, is used instead of the kubeconfig (library users, tests).
	RESTConfig *rest.Config
	// Flags, when set, are kubectl's kubeconfig flags (--kubeconfig, --context,
	// --as, --request-timeout, --server, --token, ...) as the CLI binds them;
	// their --kubeconfig and --context win over the fields above.
	Flags *genericclioptions.ConfigFlags
}

// Explicit says whether the target names a cluster itself (a kubeconfig file,
// a context, a server or a REST config) rather than leaving it to the current
// context.
func (c *KubeconfigTarget) Explicit() bool {
	c.fromFlags()
	if c.RESTConfig != nil || c.Kubeconfig != "" || c.Context != "" {
		return true
	}
	return c.Flags != nil && c.Flags.APIServer != nil && *c.Flags.APIServer != ""
}

func (c *KubeconfigTarget) fromFlags() {
	if c.Flags == nil {
		return
	}
	if c.Flags.KubeConfig != nil && *c.Flags.KubeConfig != "" {
		c.Kubeconfig = *c.Flags.KubeConfig
	}
	if c.Flags.Context != nil && *c.Flags.Context != "" {
		c.Context = *c.Flags.Context
	}
}

// loader reads the kubeconfig as the target says.
func (c *KubeconfigTarget) loader() (clientcmd.ClientConfig, *clientcmd.ClientConfigLoadingRules) {
	c.fromFlags()
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	if c.Flags != nil {
		if c.Kubeconfig != "" {
			c.Flags.KubeConfig = &c.Kubeconfig
		}
		if c.Context != "" {
			c.Flags.Context = &c.Context
		}
		return c.Flags.ToRawKubeConfigLoader(), rules
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context}), rules
}

// ContextName is the kubeconfig context the target uses, for messages: Context
// when given, else the kubeconfig's current context; empty for a REST config or
// a kubeconfig that cannot be read.
func (c *KubeconfigTarget) ContextName() string {
	if c.RESTConfig != nil {
		return ""
	}
	loader, _ := c.loader()
	if c.Context != "" {
		return c.Context
	}
	raw, err := loader.RawConfig()
	if err != nil {
		return ""
	}
	return raw.CurrentContext
}

// Config returns the REST config of the cluster.
func (c *KubeconfigTarget) Config() (*rest.Config, error) {
	if c.RESTConfig != nil {
		return rest.CopyConfig(c.RESTConfig), nil
	}
	loader, rules := c.loader()
	if c.Context != "" {
		// Name the file and the contexts it has: clientcmd's own message names neither.
		if raw, err := loader.RawConfig(); err == nil && raw.Contexts[c.Context] == nil {
			files := rules.GetLoadingPrecedence()
			if rules.ExplicitPath != "" {
				files = []string{rules.ExplicitPath}
			}
			return nil, fmt.Errorf("the kubeconfig (%s) has no context %q; it has: %s",
				strings.Join(files, string(filepath.ListSeparator)), c.Context, strings.Join(slices.Sorted(maps.Keys(raw.Contexts)), ", "))
		}
	}
	cfg, err := loader.ClientConfig()
	if clientcmd.IsEmptyConfig(err) || err == nil && c.defaultServer(loader, cfg) {
		return nil, c.noCluster(loader, rules)
	}
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}

// defaultServer says whether cfg's server is the one client-go falls back to
// when the kubeconfig names none (http://localhost:8080): the kubeconfig is
// missing or empty, has no current context, or its context names no cluster.
// kubectl then tries localhost:8080 and fails there; kubeplug says why at
// once, before any request (a server the kubeconfig or --server names
// explicitly, even that one, is used as given).
func (c *KubeconfigTarget) defaultServer(loader clientcmd.ClientConfig, cfg *rest.Config) bool {
	if cfg.Host != clientcmd.ClusterDefaults.Server {
		return false
	}
	if c.Flags != nil && c.Flags.APIServer != nil && *c.Flags.APIServer != "" {
		return false
	}
	raw, err := loader.RawConfig()
	if err != nil {
		return false
	}
	for _, cl := range raw.Clusters {
		if cl != nil && cl.Server == cfg.Host {
			return false
		}
	}
	return true
}

// noCluster is the error for a kubeconfig that names no cluster to talk to:
// which file, what it lacks, and what to give instead.
func (c *KubeconfigTarget) noCluster(loader clientcmd.ClientConfig, rules *clientcmd.ClientConfigLoadingRules) error {
	files := rules.GetLoadingPrecedence()
	if rules.ExplicitPath != "" {
		files = []string{rules.ExplicitPath}
	}
	where := strings.Join(files, string(filepath.ListSeparator))
	const fix = "give --context or --kubeconfig for a cluster, or bring a local one up with kubeplug up cluster.yaml (it becomes the current context)"
	raw, err := loader.RawConfig()
	name := c.Context
	if err == nil && name == "" {
		name = raw.CurrentContext
	}
	var have string
	if err == nil && len(raw.Contexts) > 0 {
		have = " (it has: " + strings.Join(slices.Sorted(maps.Keys(raw.Contexts)), ", ") + ")"
	}
	switch {
	case err != nil || len(raw.Contexts) == 0 && len(raw.Clusters) == 0:
		return fmt.Errorf("no cluster to talk to: the kubeconfig %s is missing or empty; %s", where, fix)
	case name == "":
		return fmt.Errorf("no cluster to talk to: the kubeconfig %s has no current context%s; %s", where, have, fix)
	case raw.Contexts[name] == nil:
		return fmt.Errorf("no cluster to talk to: the current context %q of the kubeconfig %s is not defined there%s; %s", name, where, have, fix)
	default:
		return fmt.Errorf("no cluster to talk to: context %q of the kubeconfig %s names no cluster with a server (cluster %q); %s", name, where, raw.Contexts[name].Cluster, fix)
	}
}

// ForCluster is the target for the cluster file cl: an explicit target as it
// is; else, when cl's provider runs the cluster on this machine (the local
// provider, state in stateDir), that cluster's own kubeconfig — not whatever the
// current context is; else the current context. A local cluster whose state
// exists but that is not running is an error: the file names a cluster, and
// the current context is some other one.
func (c KubeconfigTarget) ForCluster(ctx context.Context, cfg *Config, cl *config.Cluster, stateDir string) (KubeconfigTarget, error) {
	t, _, err := c.forCluster(ctx, cfg, cl, stateDir)
	return t, err
}

// forCluster is ForCluster, and returns the provider when the target is the
// file's own cluster, which that provider runs on this machine: one whose
// machines kubeplug reconciles (see machines.go) and whose machine facts its
// runs record (machineFacts); nil otherwise.
func (c KubeconfigTarget) forCluster(ctx context.Context, cfg *Config, cl *config.Cluster, stateDir string) (KubeconfigTarget, provider.Provider, error) {
	if c.Explicit() || cl == nil {
		return c, nil, nil
	}
	name := cl.Spec.Metadata.Name
	prov, err := provider.New(provider.Config{ClusterName: name, Spec: cl.Spec.Spec.Provider, StateDir: stateDir, Logger: cfg.logger()})
	if err != nil {
		return c, nil, nil //nolint:nilerr // no provider here: the kubeconfig decides
	}
	loc, ok := prov.(provider.Locator)
	if !ok {
		return c, nil, nil
	}
	kubeconfig, err := loc.Locate(ctx)
	if err == nil {
		cfg.logger().Info("using the kubeconfig of the cluster the file names", "cluster", name, "kubeconfig", kubeconfig)
		out := c
		out.Kubeconfig = kubeconfig
		if out.Flags != nil {
			out.Flags.KubeConfig = &out.Kubeconfig
		}
		return out, prov, nil
	}
	if s, ok := prov.(provider.Stateful); ok && errors.Is(err, provider.ErrNotRunning) {
		if _, serr := os.Stat(s.StateDir()); serr == nil {
			return c, nil, fmt.Errorf("%s names local cluster %s, which is not running (state dir %s): start it with kubeplug up -f %s, or give --context or --kubeconfig to use another cluster", cl.File, name, s.StateDir(), cl.File)
		}
	}
	return c, nil, nil
}

// neverStarted is the state directory of cl's local cluster when cl's provider
// runs the cluster on this machine and it was never started here (no state
// directory, so ForCluster falls back to the current context); "" otherwise,
// and always for an explicit target.
func (c KubeconfigTarget) neverStarted(ctx context.Context, cfg *Config, cl *config.Cluster, stateDir string) string {
	if c.Explicit() || cl == nil {
		return ""
	}
	prov, err := provider.New(provider.Config{ClusterName: cl.Spec.Metadata.Name, Spec: cl.Spec.Spec.Provider, StateDir: stateDir, Logger: cfg.logger()})
	if err != nil {
		return ""
	}
	loc, ok := prov.(provider.Locator)
	s, stateful := prov.(provider.Stateful)
	if !ok || !stateful {
		return ""
	}
	if _, err := loc.Locate(ctx); !errors.Is(err, provider.ErrNotRunning) {
		return ""
	}
	if _, err := os.Stat(s.StateDir()); !errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	return s.StateDir()
}
