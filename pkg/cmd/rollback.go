package cmd

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
)

func newRollbackCmd(o *options) *cobra.Command {
	var file string
	a := action.NewRollback(o.cfg)
	cmd := &cobra.Command{
		Use:   "rollback PLUGIN [--to-revision N] [-f cluster.yaml]",
		Short: "Restore a recorded revision of an installed plugin",
		Long: `Restore a revision from the plugin's history (kubeplug history PLUGIN): the objects
that revision applied are applied again, objects it did not have are pruned, the
plugin's Helm releases are rolled back to the Helm revisions it recorded, and
kubeplug waits until everything is ready. Like Helm, a rollback is a new revision
("rollback to N"). Without --to-revision it restores the newest Ready revision
before the current one.

The rollback needs only the release records in the cluster, not the plugin's
package, so no cluster file is needed. The cluster file still names the version
and values it wants: the next apply moves the plugin there again. With -f,
kubeplug warns about exactly that. Like apply, a rollback holds the cluster's
operation lease while it runs.

A plugin may contribute to the machines too: control-plane flags, node labels and
taints, files and units. Given -f with the cluster file of a cluster kubeplug
brought up (the local provider; --state-dir as for up), rollback works on that
cluster, not the current context, and once the objects are restored reconciles
its machines as up does, with the plugin at the restored version: the API server
restarts with that version's flags, its labels and taints are back on the Nodes.
The release records keep only a digest of a revision's values, never the
values, so this is done only when the file's values for the plugin are the
revision's (and the file otherwise matches what the cluster has); else kubeplug
says what differs and which contributions do not follow. That is checked and
rendered before anything changes. On any other cluster only the Kubernetes
objects change, and kubeplug names the contributions that do not follow. With --dry-run=server the API server checks every
object of the revision (admission included) without persisting anything; nothing
is pruned, recorded or rolled back in Helm.`,
		Example: `  kubeplug rollback cert-manager
  kubeplug rollback cert-manager --to-revision 3 --timeout 10m
  kubeplug rollback cert-manager -f cluster.yaml -o json
  kubeplug rollback oidc --to-revision 1 -f cluster.yaml  # a local cluster: its API server flags follow
  kubeplug rollback cert-manager --dry-run=server`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			plugin := args[0]
			if file != "" {
				cl, l := config.Load(file)
				if o.report(l) {
					return errFailed
				}
				a.Cluster = cl
				for _, r := range cl.Enabled() {
					if r.Name == plugin {
						_, _ = fmt.Fprintf(o.streams.Err, "warning: %s still enables %s; the next up or apply moves it to the version and values the file names\n", file, plugin)
					}
				}
			}
			pr := newProgress(o)
			o.cfg.Progress, a.Events, a.ProviderEvents = pr.stage, pr.event, pr.providerEvent
			rec, l := a.Run(cmd.Context(), plugin)
			pr.close()
			if o.report(l) {
				return errFailed
			}
			return o.print(rec, func(w io.Writer) error {
				if a.DryRun {
					_, err := fmt.Fprintf(w, "%s: rollback to revision %d (version %s) validated by the server (dry run); nothing changed\n", plugin, rec.Revision, rec.Version)
					return err
				}
				_, err := fmt.Fprintf(w, "%s: %s (version %s), recorded as revision %d\n", plugin, rec.Description, rec.Version, rec.Revision)
				return err
			})
		},
	}
	cmd.Flags().IntVar(&a.Revision, "to-revision", 0, "the revision to restore (default: the newest Ready one before the current)")
	cmd.Flags().DurationVar(&a.Timeout, "timeout", 5*time.Minute, "how long the plugin may take to become ready")
	cmd.Flags().BoolVar(&a.ForceConflicts, "force-conflicts", false, "take over fields that another field manager owns")
	cmd.Flags().Var(dryRunValue{&a.DryRun}, "dry-run", `"server" to have the API server check the revision's objects without persisting anything`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "server"
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file: on a cluster kubeplug brought up, reconcile its machines too; warn that its next apply undoes the rollback")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	targetFlags(cmd, &a.Target)
	stateDirFlag(cmd, &a.StateDir)
	leaseFlags(cmd, &a.Lease)
	return cmd
}
