package cmd

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

func newImageCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Put container images into a local cluster's registry",
	}
	cmd.AddCommand(newImageLoadCmd(o))
	return cmd
}

func newImageLoadCmd(o *options) *cobra.Command {
	var file string
	a := action.NewLoadImage(o.cfg)
	cmd := &cobra.Command{
		Use:   "load -f cluster.yaml ARCHIVE...",
		Short: "Push image archives into the registry a local cluster's real nodes pull from",
		Long: `Push the images of docker-archive tarballs (what docker save writes) or OCI
image layout directories into the registry of a local cluster
that has real nodes (spec.provider.local.realPools). Each image keeps its
repository and tag, and the nodes pull every registry name through that
registry, so a Pod that names example.com/team/app:v1 runs the loaded
example.com/team/app:v1 without any change to its manifest.`,
		Example: `  docker save -o app.tar example.com/team/app:v1    # on a machine with Docker
  kubeplug image load -f cluster.yaml app.tar
  kubeplug image load -f cluster.yaml ./oci-layout   # an OCI image layout directory`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var pr *progress
			if o.output != "json" { // JSON: stdout has the result only
				pr = newProgress(o)
				a.ProviderEvents = pr.providerEvent
			}
			pushed, l := withCluster(file, func(cl *config.Cluster) ([]string, diag.List) { return a.Run(cmd.Context(), cl, args) })
			pr.close()
			if o.report(l) {
				return errFailed
			}
			return o.print(map[string][]string{"images": pushed}, func(w io.Writer) error {
				for _, p := range pushed {
					if _, err := fmt.Fprintln(w, "loaded", p); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file (required)")
	stateDirFlag(cmd, &a.StateDir)
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}
