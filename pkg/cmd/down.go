package cmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

func newDownCmd(o *options) *cobra.Command { return downCmd(o, action.NewDown(o.cfg)) }

// downCmd binds the down command's flags into a.
func downCmd(o *options, a *action.Down) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "down -f cluster.yaml",
		Short: "Stop a local cluster: uninstall its plugins, stop its control plane and nodes",
		Long: `Uninstall the cluster's plugins in reverse dependency order (so their cleanup
runs), stop the control plane and the simulated nodes, and remove the cluster's
context from your kubeconfig. The state directory (certificates, etcd data, the
machines' roots, logs) is kept, so "kubeplug up" starts the same cluster again;
--purge deletes it, and fails when there is none. Nothing outside the state
directory is touched.

When the cluster runs but no API server of it answers (etcd's quorum lost),
its plugins cannot be uninstalled: down refuses and stops nothing, naming
--keep-plugins (stop without uninstalling them) and --purge, which says the
plugins were not uninstalled and deletes the cluster anyway.`,
		Example: `  kubeplug down -f examples/quickstart/cluster.yaml
  kubeplug down -f examples/quickstart/cluster.yaml --purge`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var pr *progress
			if o.output == "text" {
				// Progress lines on stderr; the other formats print only the result.
				pr = newProgress(o)
				a.ProviderEvents = pr.providerEvent
			}
			res, l := withCluster(file, func(cl *config.Cluster) (*action.DownResult, diag.List) { return a.Run(cmd.Context(), cl) })
			pr.close()
			failed := o.report(l)
			if res != nil && !failed {
				if err := action.UnmergeKubeconfig(res.Cluster, res.CA); err != nil {
					_, _ = fmt.Fprintf(o.streams.Err, "warning: %v\n", err)
				}
			}
			if res == nil || failed {
				return errFailed
			}
			return o.print(res, func(w io.Writer) error {
				if len(res.Uninstalled) > 0 {
					_, _ = fmt.Fprintf(w, "uninstalled: %s\n", strings.Join(res.Uninstalled, ", "))
				}
				msg := "cluster %s stopped; its state is kept in %s\n"
				if res.Purged {
					msg = "cluster %s stopped; its state %s is deleted\n"
				}
				_, err := fmt.Fprintf(w, msg, res.Cluster, res.StateDir)
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file (required)")
	clusterFileArg(cmd)
	cmd.Flags().BoolVar(&a.Purge, "purge", false, "delete the state directory too")
	cmd.Flags().BoolVar(&a.KeepPlugins, "keep-plugins", false, "stop without uninstalling the plugins first")
	cmd.Flags().DurationVar(&a.APIWait, "api-wait", a.APIWait, "how long to wait for the running cluster's API server before uninstalling the plugins; one that does not answer (etcd's quorum lost) is refused unless --keep-plugins or --purge")
	leaseFlags(cmd, &a.Uninstall.Lease)
	stateDirFlag(cmd, &a.StateDir)
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}
