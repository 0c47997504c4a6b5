package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

func newStatusCmd(o *options) *cobra.Command {
	a := action.NewStatus(o.cfg)
	var file string
	cmd := &cobra.Command{
		Use:   "status [-f cluster.yaml]",
		Short: "Show the plugins installed in a cluster, whether their objects are ready, and drift",
		Long: `List every plugin kubeplug installed in the cluster (from its inventories): version,
phase of the last apply, and how many of its objects exist and are ready. A plugin
whose last apply was Ready but whose objects are now missing or not ready (its
Pods crash, its APIService is not Available) is shown Degraded, with why.

With -f, plugins the cluster file enables but the cluster does not have are listed
too, and DRIFT counts each installed plugin's objects that differ from what the
file would apply (changed by someone since kubeplug applied them, or missing;
'kubeplug diff -f FILE --live' shows the fields). Without -f there is nothing to
compare with, and DRIFT is "-" (unknown).

OWNER says what manages the plugin: "cli" when kubeplug apply or up installed
it, else the PluginInstallation (namespace/name) of kubeplug's controller that
does; the CLI may not change or uninstall those.

-f looks at the cluster the file names: a local cluster's own kubeconfig, not the
current context. A local cluster that is stopped is an error; so is one never
started on this machine, unless the current context is that cluster (the last
cluster file applied to it has the file's name) — as when the file was applied to
an existing cluster. --context or --kubeconfig look where they say.`,
		Example: `  kubeplug status
  kubeplug status -f cluster.yaml -o json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st []action.PluginReport
			var l diag.List
			if file == "" {
				st, l = a.Report(cmd.Context(), nil)
			} else {
				st, l = withCluster(file, func(cl *config.Cluster) ([]action.PluginReport, diag.List) { return a.Report(cmd.Context(), cl) })
			}
			failed := o.report(l)
			if st == nil {
				if failed {
					return errFailed
				}
				st = []action.PluginReport{}
			}
			err := o.print(st, func(w io.Writer) error {
				rows := make([][]string, 0, len(st))
				for _, s := range st {
					drift := "-"
					if s.Drift != nil {
						drift = fmt.Sprint(*s.Drift)
					}
					phase, msg := s.Phase, s.Message
					if s.Degraded {
						// The last apply was Ready; what is wrong now is news.
						phase = "Degraded"
						if msg == "" {
							msg = strings.Join(s.NotReady, "; ")
						}
					}
					owner := s.Owner
					if owner == "" {
						owner = "-" // not installed
					}
					rows = append(rows, []string{s.Plugin, s.Version, phase, fmt.Sprintf("%d/%d", s.Ready, s.Objects), fmt.Sprint(s.Missing), drift, strings.Join(s.Releases, ", "), owner, msg})
				}
				return table(w, []string{"PLUGIN", "VERSION", "PHASE", "READY", "MISSING", "DRIFT", "HELM RELEASES", "OWNER", "MESSAGE"}, rows)
			})
			if err == nil && failed {
				err = errFailed
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "a cluster file: include the plugins it enables and count drift from what it would apply")
	clusterFileArg(cmd)
	targetFlags(cmd, &a.Target)
	stateDirFlag(cmd, &a.StateDir)
	return cmd
}
