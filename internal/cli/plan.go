package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
)

func newPlanCmd(o *options) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "plan -f cluster.yaml",
		Short: "Show which plugins run, in which waves, and what each contributes",
		Long: `Resolve the cluster file's plugins — versions, dependencies, conflicts, the
Kubernetes version, ordering hints and the order list — into waves (plugins of one
wave run in parallel; every dependency is in an earlier wave), run the initialise
stage, and list every construct with the plugin that contributed it. Nothing is
written and nothing is deployed. Sensitive values are shown as ***.`,
		Example: `  kubeplug plan -f examples/quickstart/cluster.yaml
  kubeplug plan -f examples/quickstart/cluster.yaml -o json | jq '.waves'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, l := action.NewPlan(o.config()).Run(cmd.Context(), file)
			if o.report(l) {
				return errFailed
			}
			return o.print(doc, func(w io.Writer) error {
				var b strings.Builder
				fmt.Fprintf(&b, "Cluster %s, Kubernetes %s\n\n", doc.Cluster, doc.KubernetesVersion)
				rows := make([][]string, 0, len(doc.Plugins))
				for _, p := range doc.Plugins {
					how := "enabled"
					if !p.Enabled {
						how = "required"
					}
					rows = append(rows, []string{fmt.Sprint(p.Wave), p.Name, p.Version, p.Origin, how, shortDigest(p.Digest)})
				}
				if err := table(&b, []string{"WAVE", "PLUGIN", "VERSION", "ORIGIN", "WHY", "DIGEST"}, rows); err != nil {
					return err
				}
				b.WriteString("\nContributions:\n")
				crow := make([][]string, 0, len(doc.Contributions))
				for _, c := range doc.Contributions {
					crow = append(crow, []string{"  " + c.Plugin, c.Kind, c.Key})
				}
				if err := table(&b, []string{"  PLUGIN", "KIND", "KEY"}, crow); err != nil {
					return err
				}
				_, err := io.WriteString(w, b.String())
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file (required)")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}
