package cmd

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

func newGetKubeconfigCmd(o *options) *cobra.Command {
	var file string
	a := action.NewGetKubeconfig(o.cfg)
	cmd := &cobra.Command{
		Use:   "get-kubeconfig -f cluster.yaml",
		Short: "Print the path of a running local cluster's kubeconfig",
		Long: `Print the path of the kubeconfig kubeplug up wrote into the cluster's state
directory, for tools that should not use your own kubeconfig.`,
		Example: `  export KUBECONFIG=$(kubeplug get-kubeconfig -f examples/quickstart/cluster.yaml)
  kubectl get nodes`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, l := withCluster(file, func(cl *config.Cluster) (string, diag.List) { return a.Run(cmd.Context(), cl) })
			if o.report(l) {
				return errFailed
			}
			return o.print(map[string]string{"kubeconfig": path}, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, path)
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file (required)")
	clusterFileArg(cmd)
	stateDirFlag(cmd, &a.StateDir)
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}
