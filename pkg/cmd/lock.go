package cmd

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/lock"
)

func newLockCmd(o *options) *cobra.Command {
	var file string
	var locked, update bool
	cmd := &cobra.Command{
		Use:   "lock -f cluster.yaml [--locked | --update [NAME...]]",
		Short: "Pin every resolved plugin's version, source and digest in kubeplug.lock",
		Long: `Resolve the cluster file's plugins as plan does (nothing is deployed) and write
` + lock.FileName + ` beside it: per plugin its version, the origin it came from
and its package digest. Commit it with the cluster file.

The lock is the pin, as Helm's Chart.lock, go.sum, npm's package-lock.json and
Cargo.lock are: while it exists, plan, render, diff, apply and up resolve every
plugin to the version it pins, so a version published later is not taken until
you ask for it. A plain 'kubeplug lock' keeps the pinned versions too; it adds
plugins the file enables anew, drops those it no longer enables, and moves a
plugin whose pinned version the file's version constraint no longer admits.

With --update the newest versions the cluster file allows are taken and pinned:
of the plugins named, or of every plugin when none is named. plan shows, beside
each locked version, the newer one an update would take; plan, render, apply and
up with --update take them too (a successful apply or up writes them to the lock).

With --locked nothing is written: the command fails, listing the changes, when the
lock file would change (for CI). plan, render, apply and up with --locked also fail
when their resolution would change the lock file (or there is none).

When a lock file is present, every resolution refuses a plugin whose locked
version now has another digest (the package changed under the same version),
naming both digests.`,
		Example: `  kubeplug lock -f cluster.yaml
  kubeplug plan -f cluster.yaml                        # LOCKED and NEWER columns
  kubeplug lock -f cluster.yaml --update cert-manager  # take cert-manager's newest
  kubeplug lock -f cluster.yaml --update               # take every plugin's newest
  kubeplug lock -f cluster.yaml --locked
  kubeplug apply -f cluster.yaml --locked   # in CI: deploy exactly what is locked`,
		// Positional arguments are the plugins --update moves; without
		// --update one argument naming a file is the cluster file, as for the
		// other commands (kind's and kubectl's habit).
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || update {
				return nil
			}
			if fi, err := os.Stat(args[0]); len(args) == 1 && err == nil && !fi.IsDir() {
				if f := cmd.Flags().Lookup("file"); f.Changed {
					return fmt.Errorf("the cluster file is given twice, as -f %s and as argument %s: give it once", f.Value.String(), args[0])
				}
				return nil
			}
			return fmt.Errorf("plugin names (%s) name the plugins to update: kubeplug lock -f FILE --update %s", strings.Join(args, " "), strings.Join(args, " "))
		},
		PreRunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && !update {
				return cmd.Flags().Set("file", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if !update {
				args = nil // the cluster file, taken by PreRunE
			}
			a := action.NewLock(o.config())
			a.Locked = locked
			a.Update, a.UpdateAll = args, update && len(args) == 0
			res, l := withCluster(file, func(cl *config.Cluster) (*action.LockResult, diag.List) {
				return a.Run(cmd.Context(), cl)
			})
			if o.report(l) || res == nil {
				return errFailed
			}
			return o.print(res, func(w io.Writer) error {
				var b strings.Builder
				if len(res.Changes) == 0 {
					fmt.Fprintf(&b, "%s is up to date (%d plugins)\n", res.File, len(res.Lock.Plugins))
				} else {
					fmt.Fprintf(&b, "wrote %s (%d plugins)\n", res.File, len(res.Lock.Plugins))
					for _, c := range res.Changes {
						fmt.Fprintf(&b, "  %s\n", c)
					}
				}
				if len(res.Newer) > 0 {
					fmt.Fprintf(&b, "%s\n", heldBack(res.Newer, file))
				}
				_, err := io.WriteString(w, b.String())
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file (required)")
	cmd.Flags().BoolVar(&locked, "locked", false, "fail, writing nothing, when the lock file would change")
	cmd.Flags().BoolVar(&update, "update", false, "take the newest versions the cluster file allows: of the plugins named, else of every plugin")
	cmd.MarkFlagsMutuallyExclusive("locked", "update")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}

// heldBack says which newer versions the lock held back (newer: "NAME
// VERSION" each) and how to take them.
func heldBack(newer []string, file string) string {
	names := make([]string, len(newer))
	for i, n := range newer {
		names[i], _, _ = strings.Cut(n, " ")
	}
	return fmt.Sprintf("newer versions held back by %s: %s (take them with kubeplug lock -f %s --update %s)", lock.FileName, strings.Join(newer, ", "), file, strings.Join(names, " "))
}
