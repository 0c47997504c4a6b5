package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
)

func newCatalogCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Build plugin catalogs",
		Long: `A catalog is a set of package archives (written by 'plugin package') served over
HTTPS with an index.yaml that lists every version: name, version, description,
kubernetesVersion, requires, conflicts, after, before, package digest and URL.
The resolver picks versions from the index alone and downloads only the archives
it picked; a downloaded package must agree with its index entry (digest and every
field the resolver read), or it is refused naming both.

Use a catalog with --catalog URL or in cluster.yaml:

  spec:
    plugins:
      sources:
      - catalog: https://plugins.example.com/index.yaml

Downloads are kept by digest under the user's cache directory and checked on every
use. Plain http is accepted for loopback addresses only.`,
	}
	cmd.AddCommand(newCatalogIndexCmd(o))
	return cmd
}

func newCatalogIndexCmd(o *options) *cobra.Command {
	a := action.NewCatalogIndex(nil)
	cmd := &cobra.Command{
		Use:   "index DIR",
		Short: "Write the index.yaml of the package archives in DIR",
		Long: `Check every package archive (*.tgz) in DIR and below it, as 'plugin lint' does, and
write the catalog index: entries by name, newest first, each with its package
digest and its URL relative to the index (or below --url). The same name and
version twice is an error naming both archives; nothing is written on any error.`,
		Example: `  kubeplug plugin package ./demo -o dist/demo-0.1.0.tgz
  kubeplug catalog index dist -o dist/index.yaml
  kubeplug plugin list --catalog https://plugins.example.com/index.yaml`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			run := action.NewCatalogIndex(o.config())
			run.Output, run.BaseURL = a.Output, a.BaseURL
			x, file, l := run.Run(cmd.Context(), args[0])
			if o.report(l) || x == nil {
				return errFailed
			}
			n := 0
			for _, es := range x.Entries {
				n += len(es)
			}
			return o.print(map[string]any{"file": file, "plugins": len(x.Entries), "versions": n}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "wrote %s: %d plugin(s), %d version(s)\n", file, len(x.Entries), n)
				return err
			})
		},
	}
	// -o names the file here, as it names the directory for render.
	cmd.Flags().StringVarP(&a.Output, "output", "o", "", "the index to write (default: DIR/index.yaml); a .json name writes JSON, which large catalogs decode several times faster")
	cmd.Flags().StringVar(&a.BaseURL, "url", "", "the URL the archives are served under (default: URLs relative to the index)")
	_ = cmd.MarkFlagFilename("output", "yaml")
	return cmd
}
