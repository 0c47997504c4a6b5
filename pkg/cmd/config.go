package cmd

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

func newConfigCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with cluster files (cluster.yaml)",
	}
	cmd.AddCommand(newConfigValidateCmd(o))
	return cmd
}

func newConfigValidateCmd(o *options) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "validate -f cluster.yaml",
		Short: "Check a cluster file and every enabled plugin's values",
		Long: `Check a cluster file: its structure against the cluster schema, its versions and
references, that every enabled plugin exists in a version its constraint allows, and
every plugin's effective values (cluster-level and per node pool) against the
plugin's values schema.

Values are merged in this order, later wins: the plugin's defaults, the cluster's
values, each valuesFrom entry in order, then a node pool's values for that pool.
Every problem is printed as FILE:LINE:COL: field.path: message; sensitive values
are shown as ***.`,
		Example: `  kubeplug config validate -f examples/quickstart/cluster.yaml
  HELLO_API_TOKEN=s3cret kubeplug config validate -f examples/quickstart/cluster.yaml -o yaml`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, l := withCluster(file, func(cl *config.Cluster) (*action.ValidateResult, diag.List) {
				return action.NewValidate(o.cfg).Run(cmd.Context(), cl)
			})
			if o.report(l) {
				return errFailed
			}
			return o.print(res, func(w io.Writer) error {
				if _, err := fmt.Fprintf(w, "%s is valid: cluster %s, Kubernetes %s, %d plugin(s) enabled\n", file, res.Cluster, res.KubernetesVersion, len(res.Plugins)); err != nil {
					return err
				}
				for _, p := range res.Plugins {
					vals, err := yaml.Marshal(p.Values)
					if err != nil {
						return fmt.Errorf("render values: %w", err)
					}
					if _, err := fmt.Fprintf(w, "\n%s %s (%s, %s)\n%s", p.Name, p.Version, p.Origin, shortDigest(p.Digest), indent(string(vals))); err != nil {
						return err
					}
					for _, pool := range slices.Sorted(maps.Keys(p.PoolValues)) {
						pv, err := yaml.Marshal(p.PoolValues[pool])
						if err != nil {
							return fmt.Errorf("render values: %w", err)
						}
						if _, err := fmt.Fprintf(w, "  on node pool %s:\n%s", pool, indent(indent(string(pv)))); err != nil {
							return err
						}
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file (required)")
	clusterFileArg(cmd)
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}
