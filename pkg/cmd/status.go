package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"
	"k8s.io/client-go/kubernetes"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/dashboard"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

func newStatusCmd(o *options) *cobra.Command {
	a := action.NewStatus(o.cfg)
	var file string
	var watch bool
	cmd := &cobra.Command{
		Use:   "status [-f cluster.yaml]",
		Short: "Show the plugins installed in a cluster, whether their objects are ready, and drift",
		Long: `List every plugin kubeplug installed in the cluster (from its inventories): version,
phase of the last apply, and how many of its objects exist and are ready. A plugin
whose last apply was Ready but whose objects are now missing or not ready (its
Pods crash, its APIService is not Available) is shown Degraded, with why.

With -f, plugins the cluster file enables but the cluster does not have are listed
too, and DRIFT counts each installed plugin's objects that differ from what the
file would apply (changed by someone since kubeplug applied them, or missing;
'kubeplug diff -f FILE --live' shows the fields). Without -f there is nothing to
compare with, and DRIFT is "-" (unknown).

OWNER says what manages the plugin: "cli" when kubeplug apply or up installed
it, else the PluginInstallation (namespace/name) of kubeplug's controller that
does; the CLI may not change or uninstall those.

-f looks at the cluster the file names: a local cluster's own kubeconfig, not the
current context. A local cluster that is stopped is an error; so is one never
started on this machine, unless the current context is that cluster (the last
cluster file applied to it has the file's name) — as when the file was applied to
an existing cluster. --context or --kubeconfig look where they say.

--watch keeps following the cluster until Ctrl-C: it watches kubeplug's release
records through the API server (no polling) and, when one changes (an apply,
a rollback, an uninstall, from any machine), shows the table again — redrawn in
place on a terminal, printed again after a line "--- HH:MM:SS" otherwise (and
with -o json, one JSON document per change).`,
		Example: `  kubeplug status
  kubeplug status -f cluster.yaml -o json
  kubeplug status --watch`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cl *config.Cluster
			var loaded diag.List
			if file != "" {
				if cl, loaded = config.Load(file); cl == nil {
					o.report(loaded)
					return errFailed
				}
			}
			if watch {
				o.report(loaded) // warnings, once
				return o.watchStatus(cmd.Context(), a, cl)
			}
			st, l := a.Report(cmd.Context(), cl)
			l = append(loaded, l...)
			l.Sort()
			failed := o.report(l)
			if st == nil {
				if failed {
					return errFailed
				}
				st = []action.PluginReport{}
			}
			err := o.print(st, func(w io.Writer) error { return statusTable(w, st) })
			if err == nil && failed {
				err = errFailed
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after the table, show it again on every change of the release records (the API server's watch), until Ctrl-C")
	cmd.Flags().StringVarP(&file, "file", "f", "", "a cluster file: include the plugins it enables and count drift from what it would apply")
	clusterFileArg(cmd)
	targetFlags(cmd, &a.Target)
	stateDirFlag(cmd, &a.StateDir)
	return cmd
}

// statusTable writes the plugins as status shows them.
func statusTable(w io.Writer, st []action.PluginReport) error {
	rows := make([][]string, 0, len(st))
	for _, s := range st {
		drift := "-"
		if s.Drift != nil {
			drift = fmt.Sprint(*s.Drift)
		}
		phase, msg := s.Phase, s.Message
		if s.Degraded {
			// The last apply was Ready; what is wrong now is news.
			phase = "Degraded"
			if msg == "" {
				msg = strings.Join(s.NotReady, "; ")
			}
		}
		owner := s.Owner
		if owner == "" {
			owner = "-" // not installed
		}
		rows = append(rows, []string{s.Plugin, s.Version, phase, fmt.Sprintf("%d/%d", s.Ready, s.Objects), fmt.Sprint(s.Missing), drift, strings.Join(s.Releases, ", "), owner, msg})
	}
	return table(w, []string{"PLUGIN", "VERSION", "PHASE", "READY", "MISSING", "DRIFT", "HELM RELEASES", "OWNER", "MESSAGE"}, rows)
}

// watchStatus shows the status table, then again on every change of the
// release records, until ctx ends or Ctrl-C (which is no failure). The records
// are followed as the dashboard follows them (dashboard.WatchRecords): the API
// server's watch, changes coalesced over a short quiet period.
func (o *options) watchStatus(ctx context.Context, a *action.Status, cl *config.Cluster) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	text := o.output == "text"
	live := o.outTerminal() && text
	draw := func() error {
		st, l := a.Report(ctx, cl)
		if ctx.Err() != nil {
			return nil // Ctrl-C during the read
		}
		o.report(l)
		if st == nil && l.HasFatal() {
			return errFailed
		}
		if st == nil {
			st = []action.PluginReport{}
		}
		return o.print(st, func(w io.Writer) error {
			var b strings.Builder
			if live {
				// Home, clear: the table is redrawn in place.
				b.WriteString("\x1b[H\x1b[2J")
				fmt.Fprintf(&b, "kubeplug status, %s — watching; Ctrl-C stops\n\n", time.Now().Format(time.TimeOnly))
			}
			if err := statusTable(&b, st); err != nil {
				return err
			}
			_, err := io.WriteString(w, b.String())
			return err
		})
	}
	// The first table also resolves -f's cluster (a.Target), which the
	// watch then uses.
	if err := draw(); err != nil {
		return err
	}
	rc, err := a.Target.Config()
	if err != nil {
		return err
	}
	core, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("a client for the cluster: %w", err)
	}
	changed := make(chan struct{}, 1)
	shutdown, err := dashboard.WatchRecords(ctx, core, recordsNamespace, func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}
	defer shutdown()
	// An apply writes a record more than once: draw after it settles.
	for dashboard.Settled(ctx, changed, 300*time.Millisecond) {
		if !live && text {
			_, _ = fmt.Fprintf(o.streams.Out, "\n--- %s\n", time.Now().Format(time.TimeOnly))
		}
		if err := draw(); err != nil {
			return err
		}
	}
	return nil
}

// recordsNamespace holds the CLI's release records (deploy.Options.Namespace's
// default).
const recordsNamespace = "kubeplug-system"

// outTerminal says whether stdout is a terminal.
func (o *options) outTerminal() bool {
	f, ok := o.streams.Out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
