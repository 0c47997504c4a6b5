package cmd

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
)

func newHistoryCmd(o *options) *cobra.Command {
	a := action.NewHistory(o.cfg)
	var file string
	cmd := &cobra.Command{
		Use:   "history PLUGIN [-f cluster.yaml]",
		Short: "Show a plugin's recorded revisions in a cluster",
		Long: `List the revisions kubeplug recorded for an installed plugin, oldest first: when
each was applied, its result, the plugin version, and what it was (install,
upgrade, values changed, rollback to N). Every apply that changes a plugin's
version, package, values or rendered content records a new revision; a re-apply
that changes nothing does not. kubeplug keeps the newest 10 (apply --history-max).

The history comes from the release records in the cluster (Secrets of type
kubeplug.dev/release.v1 in kubeplug-system), so no cluster file is needed. With
-f, kubeplug warns when the file no longer enables the plugin: the next apply
would uninstall it.`,
		Example: `  kubeplug history cert-manager
  kubeplug history cert-manager -f cluster.yaml -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			plugin := args[0]
			if file != "" {
				warnUnlisted(o, file, plugin, "the next apply uninstalls it")
			}
			h, l := a.Run(cmd.Context(), plugin)
			if o.report(l) {
				return errFailed
			}
			return o.print(h, func(w io.Writer) error {
				rows := make([][]string, 0, len(h))
				for _, r := range h {
					updated := "-"
					if !r.Started.IsZero() {
						updated = r.Started.Local().Format(time.DateTime)
					}
					desc := r.Description
					if r.Message != "" {
						desc += ": " + r.Message
					}
					rows = append(rows, []string{fmt.Sprint(r.Revision), updated, r.Status, r.Version, desc})
				}
				return table(w, []string{"REVISION", "UPDATED", "STATUS", "VERSION", "DESCRIPTION"}, rows)
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "a cluster file, to warn when it no longer enables the plugin (optional)")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	targetFlags(cmd, &a.Target)
	return cmd
}

// warnUnlisted warns on stderr when the cluster file does not enable plugin.
func warnUnlisted(o *options, file, plugin, consequence string) {
	cl, l := config.Load(file)
	if l.HasFatal() {
		_ = o.report(l)
		return
	}
	for _, r := range cl.Enabled() {
		if r.Name == plugin {
			return
		}
	}
	_, _ = fmt.Fprintf(o.streams.Err, "warning: %s does not enable %s; %s\n", file, plugin, consequence)
}
