package cmd

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
)

func newPluginTestCmd(o *options) *cobra.Command {
	a := action.NewPluginTest(nil)
	cmd := &cobra.Command{
		Use:   "test DIR",
		Short: "Run a plugin through initialise and render against a sample cluster",
		Long: `Check the package in DIR (a directory or an archive) whole and run it through
initialise and render against a sample cluster, as 'kubeplug render' would for a
cluster enabling it: one worker pool, the Kubernetes version of the local provider,
the plugin's default values and the built-in plugins for its requirements. Unlike
'plugin lint' this runs the plugin's own code. The rendered files are listed, and
written with --output-dir. Problems are printed as FILE:LINE:COL: field: message;
the exit status is then 1.

With --cluster the plugin is also installed into a throwaway local cluster of its
own (the embedded control plane, one simulated worker; nothing else is touched,
not even your kubeconfig): its objects must become ready and its validate checks
pass; with --upgrade-from PREVIOUS (a directory or archive of an earlier version)
that version is installed first and the package under test upgrades it. Then the
plugin is uninstalled, every object it had must be gone, and the cluster is
deleted whatever happened.`,
		Example: `  kubeplug plugin test ./demo
  kubeplug plugin test ./demo --output-dir out
  kubeplug plugin test ./demo --cluster
  kubeplug plugin test ./demo --cluster --upgrade-from ./demo-0.1.0.tgz`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			run := action.NewPluginTest(o.config())
			run.OutputDir, run.Cluster, run.UpgradeFrom, run.Timeout = a.OutputDir, a.Cluster, a.UpgradeFrom, a.Timeout
			res, l := run.Run(cmd.Context(), args[0])
			if o.report(l) || res == nil {
				return errFailed
			}
			return o.print(res, func(w io.Writer) error {
				if _, err := fmt.Fprintf(w, "plugin %s@%s rendered %d file(s) against a sample cluster\n", res.Name, res.Version, len(res.Files)); err != nil {
					return err
				}
				for _, f := range res.Files {
					if _, err := fmt.Fprintln(w, "  "+f); err != nil {
						return err
					}
				}
				if c := res.Cluster; c != nil {
					how := "installed"
					if c.UpgradedFrom != "" {
						how = "upgraded from " + c.UpgradedFrom
					}
					passed := 0
					for _, ch := range c.Checks {
						if ch.OK {
							passed++
						}
					}
					if _, err := fmt.Fprintf(w, "throwaway cluster: %s, %d/%d validate check(s) passed, uninstalled with none of its %d object(s) left, cluster deleted (%s)\n",
						how, passed, len(c.Checks), c.Objects, c.Duration.Round(100*time.Millisecond)); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&a.OutputDir, "output-dir", "", "write the rendered files to this directory")
	_ = cmd.MarkFlagDirname("output-dir")
	cmd.Flags().BoolVar(&a.Cluster, "cluster", false, "also install, validate and uninstall the plugin in a throwaway local cluster")
	cmd.Flags().StringVar(&a.UpgradeFrom, "upgrade-from", "", "with --cluster: an earlier version's directory or archive, installed first and then upgraded")
	cmd.Flags().DurationVar(&a.Timeout, "timeout", 5*time.Minute, "with --cluster: how long the plugin's objects may take to become ready")
	return cmd
}
