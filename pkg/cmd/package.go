package cmd

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
)

func newPluginPackageCmd(o *options) *cobra.Command {
	a := action.NewPackage(nil)
	cmd := &cobra.Command{
		Use:   "package DIR",
		Short: "Write a plugin package as a deterministic .tgz archive and print its digest",
		Long: `Check the package in DIR as 'plugin lint' does and write it as a gzipped tar archive:
entries sorted, at the archive's root, with fixed times, owners and modes, so the
same tree always gives the same bytes. The digest printed is the package digest,
the same that 'plugin list' shows for DIR and for the archive.

An archive is accepted wherever a plugin directory is: 'plugin lint', --plugin-dir
and the dir of spec.plugins.sources in cluster.yaml. Unpacking refuses entries with
".." or absolute paths, links leaving the package, device files and FIFOs, and
archives past the package limits (16 MiB a file, 64 MiB in all, 10000 entries).`,
		Example: `  kubeplug plugin package ./demo
  kubeplug plugin package ./demo -o dist/demo-0.1.0.tgz && kubeplug plugin lint dist/demo-0.1.0.tgz`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			run := action.NewPackage(o.config())
			run.Output = a.Output
			res, l := run.Run(cmd.Context(), args[0])
			if o.report(l) || res == nil {
				return errFailed
			}
			return o.print(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "packaged plugin %s@%s in %s\ndigest: %s\n", res.Name, res.Version, res.File, res.Digest)
				return err
			})
		},
	}
	// -o names the file here, as it names the directory for render.
	cmd.Flags().StringVarP(&a.Output, "output", "o", "", "the archive to write (default: NAME-VERSION.tgz in the working directory)")
	_ = cmd.MarkFlagFilename("output", "tgz")
	return cmd
}
