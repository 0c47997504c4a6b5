package cmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
)

func newUninstallCmd(o *options) *cobra.Command {
	a := action.NewUninstall(o.cfg)
	var file string
	cmd := &cobra.Command{
		Use:   "uninstall PLUGIN... [-f cluster.yaml]",
		Short: "Remove plugins from a cluster, dependents first",
		Long: `Delete everything the named plugins applied (from their inventories) and their
inventories. A plugin that another installed plugin requires is not removed unless
--cascade removes its dependents too; plugins go dependents first, and CRDs and
Namespaces after the objects in them.

A plugin may contribute to the machines too: control-plane flags, node labels and
taints, files and units. Given -f with the cluster file of a cluster kubeplug
brought up (the local provider; --state-dir as for up), uninstall works on that
cluster, not the current context, and reconciles its machines as up does, to the
file without the removed plugins: the API server restarts without their flags,
their labels and taints leave the Nodes, their files the machines. That is
checked and rendered before anything changes; it is done only when the file
otherwise matches what the cluster has (versions, values), else kubeplug says
what differs. The file itself is not changed: kubeplug warns that it still
enables the plugins, and the next up or apply installs them again.

On any other cluster (no -f, an explicit --context or --kubeconfig, a provider
that does not run it here) only the Kubernetes objects go, and kubeplug names
every contribution that stays and how to remove it.`,
		Example: `  kubeplug uninstall metrics-server
  kubeplug uninstall oidc -f cluster.yaml                # a local cluster: its API server flags go too
  kubeplug uninstall cert-manager --cascade -f cluster.yaml
  kubeplug uninstall metrics-server --dry-run=server   # what would go, checked by the API server`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file != "" {
				cl, l := config.Load(file)
				if o.report(l) {
					return errFailed
				}
				a.Cluster = cl
				for _, r := range cl.Enabled() {
					for _, name := range args {
						if r.Name == name {
							_, _ = fmt.Fprintf(o.streams.Err, "warning: %s still enables %s; the next up or apply installs it again\n", file, name)
						}
					}
				}
			}
			pr := newProgress(o)
			o.cfg.Progress, a.Events, a.ProviderEvents = pr.stage, pr.event, pr.providerEvent
			res, l := a.Run(cmd.Context(), args...)
			pr.close()
			if o.report(l) {
				return errFailed
			}
			return o.print(res, func(w io.Writer) error {
				var err error
				if a.DryRun {
					_, err = fmt.Fprintf(w, "would uninstall (server dry run, nothing changed): %s\n", strings.Join(res.Removed, ", "))
					if m := res.Machines; err == nil && m != nil {
						_, err = fmt.Fprintf(w, "would reconcile the machines of cluster %s\n", m.Cluster)
					}
					return err
				}
				_, err = fmt.Fprintf(w, "uninstalled: %s\n", strings.Join(res.Removed, ", "))
				if m := res.Machines; err == nil && m != nil {
					restarted := ""
					if len(m.Restarted) > 0 {
						restarted = " (restarted: " + strings.Join(m.Restarted, ", ") + ")"
					}
					_, err = fmt.Fprintf(w, "machines of cluster %s reconciled%s\n", m.Cluster, restarted)
				}
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file: on a cluster kubeplug brought up, reconcile its machines too; else, warn about plugins it still enables")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	cmd.Flags().BoolVar(&a.Cascade, "cascade", false, "also remove installed plugins that require the named ones")
	cmd.Flags().Var(dryRunValue{&a.DryRun}, "dry-run", `"server" to have the API server check every delete without persisting it (the release records stay)`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "server"
	_ = cmd.RegisterFlagCompletionFunc("dry-run", cobra.FixedCompletions([]string{"none", "server"}, cobra.ShellCompDirectiveNoFileComp))
	targetFlags(cmd, &a.Target)
	stateDirFlag(cmd, &a.StateDir)
	leaseFlags(cmd, &a.Lease)
	return cmd
}
