package action

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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
}

// Config returns the REST config of the cluster.
func (c *KubeconfigTarget) Config() (*rest.Config, error) {
	if c.RESTConfig != nil {
		return rest.CopyConfig(c.RESTConfig), nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context})
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
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}
