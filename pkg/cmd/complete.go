package cmd

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/deploy"
)

// completionTimeout bounds how long a shell completion waits for the cluster:
// completion is interactive, so an unreachable cluster completes nothing, quickly.
const completionTimeout = 2 * time.Second

// registerCompletions adds dynamic completions across the command tree:
// contexts of the kubeconfig for every --context, the plugins installed in the
// target cluster (from its release records) for history, rollback and
// uninstall, and a plugin's revisions for rollback --to-revision.
func registerCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Flags().Lookup("context") != nil && c.Flags().Lookup("kubeconfig") != nil {
			_ = c.RegisterFlagCompletionFunc("context", completeContexts)
		}
		if c.Parent() != root {
			return
		}
		switch c.Name() {
		case "history", "rollback":
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return installedPlugins(cmd), cobra.ShellCompDirectiveNoFileComp
			}
		case "uninstall":
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
				return slices.DeleteFunc(installedPlugins(cmd), func(n string) bool { return slices.Contains(args, n) }), cobra.ShellCompDirectiveNoFileComp
			}
		}
		if c.Name() == "rollback" && c.Flags().Lookup("to-revision") != nil {
			_ = c.RegisterFlagCompletionFunc("to-revision", func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
				if len(args) != 1 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return revisions(cmd, args[0]), cobra.ShellCompDirectiveNoFileComp
			})
		}
	}
	walk(root)
}

// completionTarget is the cluster the command's kubeconfig flags name: the
// same kubectl flag set (--kubeconfig, --context, --server, --token, ...) as the
// command binds, filled from the values given on the line being completed.
func completionTarget(cmd *cobra.Command) action.KubeconfigTarget {
	cf := genericclioptions.NewConfigFlags(false)
	fs := pflag.NewFlagSet("target", pflag.ContinueOnError)
	cf.AddFlags(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		given := cmd.Flags().Lookup(f.Name)
		if given == nil || !given.Changed {
			return
		}
		if sv, ok := given.Value.(pflag.SliceValue); ok { // --as-group, given once per group
			for _, v := range sv.GetSlice() {
				_ = fs.Set(f.Name, v)
			}
			return
		}
		_ = fs.Set(f.Name, given.Value.String())
	})
	return action.KubeconfigTarget{Flags: cf}
}

// completeContexts lists the contexts of the kubeconfig the command would use.
func completeContexts(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f := cmd.Flags().Lookup("kubeconfig"); f != nil {
		rules.ExplicitPath = f.Value.String()
	}
	raw, err := rules.Load()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, n := range slices.Sorted(maps.Keys(raw.Contexts)) {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completionDeployer connects to the target cluster for a completion, or
// returns nil when it cannot within completionTimeout.
func completionDeployer(cmd *cobra.Command) (*deploy.Deployer, context.Context, context.CancelFunc) {
	t := completionTarget(cmd)
	rc, err := t.Config()
	if err != nil {
		return nil, nil, nil
	}
	rc.Timeout = completionTimeout
	d, err := deploy.New(rc, deploy.Options{Retry: wait.Backoff{Steps: 1}}) // one try: no retrying an absent cluster
	if err != nil {
		return nil, nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	return d, ctx, cancel
}

// installedPlugins are the plugins with a release record in the target
// cluster; none when it is not reachable.
func installedPlugins(cmd *cobra.Command) []string {
	d, ctx, cancel := completionDeployer(cmd)
	if d == nil {
		return nil
	}
	defer cancel()
	recs, err := d.Inventories(ctx)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(recs))
	for _, r := range recs {
		names = append(names, r.Plugin)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// revisions are a plugin's recorded revisions, newest first, each with its
// description for shells that show one.
func revisions(cmd *cobra.Command, plugin string) []string {
	d, ctx, cancel := completionDeployer(cmd)
	if d == nil {
		return nil
	}
	defer cancel()
	h, err := d.History(ctx, plugin)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		r := h[i]
		out = append(out, strconv.Itoa(r.Revision)+"\t"+r.Status+" "+r.Version+" "+r.Description)
	}
	return out
}
