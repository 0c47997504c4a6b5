package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/lock"
)

func newLockCmd(o *options) *cobra.Command {
	var file string
	var locked bool
	cmd := &cobra.Command{
		Use:   "lock -f cluster.yaml [--locked]",
		Short: "Pin every resolved plugin's version, source and digest in kubeplug.lock",
		Long: `Resolve the cluster file's plugins as plan does (nothing is deployed) and write
` + lock.FileName + ` beside it: per plugin its version, the origin it came from
and its package digest. Commit it with the cluster file.

With --locked nothing is written: the command fails, listing the changes, when the
lock file would change (for CI).

When a lock file is present, plan, render and apply refuse a plugin whose locked
version now has another digest (the package changed under the same version),
naming both digests. plan, render, apply and up with --locked also fail when their
resolution would change the lock file (or there is none), listing the changes.`,
		Example: `  kubeplug lock -f cluster.yaml
  kubeplug lock -f cluster.yaml --locked
  kubeplug apply -f cluster.yaml --locked   # in CI: deploy exactly what is locked`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a := action.NewLock(o.config())
			a.Locked = locked
			res, l := withCluster(file, func(cl *config.Cluster) (*action.LockResult, diag.List) {
				return a.Run(cmd.Context(), cl)
			})
			if o.report(l) || res == nil {
				return errFailed
			}
			return o.print(res, func(w io.Writer) error {
				if len(res.Changes) == 0 {
					_, err := fmt.Fprintf(w, "%s is up to date (%d plugins)\n", res.File, len(res.Lock.Plugins))
					return err
				}
				_, err := fmt.Fprintf(w, "wrote %s (%d plugins)\n", res.File, len(res.Lock.Plugins))
				for _, c := range res.Changes {
					if err == nil {
						_, err = fmt.Fprintf(w, "  %s\n", c)
					}
				}
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file (required)")
	clusterFileArg(cmd)
	cmd.Flags().BoolVar(&locked, "locked", false, "fail, writing nothing, when the lock file would change")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}
