package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/dashboard"
)

func newDashboardCmd(o *options) *cobra.Command {
	var file, listen, stateDir string
	var target action.KubeconfigTarget
	cmd := &cobra.Command{
		Use:   "dashboard [-f cluster.yaml] [--listen 127.0.0.1:0]",
		Short: "Serve a web dashboard of the cluster: plugins, revisions, plan, catalogs",
		Long: `Serve a web dashboard of a cluster on a loopback address and print its URL; it
runs until Ctrl-C. Pages:

  Cluster   every installed plugin with its version, phase, readiness, drift
            and last apply (what kubeplug status shows), and the nodes
  Plugin    its objects with their state (Ready, NotReady, Missing, Drifted),
            its revisions (kubeplug history) with a comparison of any two,
            and a rollback to a revision, behind a confirmation
  Plan      the plan's dependency waves as a picture (kubeplug plan --graph)
  Catalogs  every plugin version the sources offer (kubeplug plugin list)
  Fleet     on a management cluster with the controller's CRDs: its
            TargetClusters, PluginInstallations (phase, conditions) and
            PluginRollouts (canary, batches, failed clusters named), with
            suspend/resume of an installation and retry of a failed
            rollout, each behind a confirmation

The pages update live: the dashboard watches kubeplug's release records
through the API server and pushes each change to open pages (server-sent
events). Everything, the rollback and fleet actions included, is done with your own
credentials (the kubeconfig and kubectl-style flags below): the dashboard has
no power of its own, and an action you may not take is refused by the API
server and the page says so.

With -f, the cluster file adds drift (as status -f counts it), the plugins'
values with sensitive values masked, the plan, the nodes' contributions and
the file's own plugin sources; -f looks at the cluster the file names, as
status -f does. Without -f, drift is "-" (unknown) and the plan page says it
needs the file.

The dashboard listens only on a loopback address and answers only requests
addressed to one (another machine, or a web page of another site, cannot use
your credentials through it). docs/dashboard.md.`,
		Example: `  kubeplug dashboard
  kubeplug dashboard -f examples/quickstart/cluster.yaml --listen 127.0.0.1:8484
  kubeplug dashboard --context staging --as viewer@example.com`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loopbackListen(listen); err != nil {
				return err
			}
			opts := dashboard.Options{Config: o.cfg, Target: target, Logger: o.cfg.Logger}
			if file != "" {
				cl, l := config.Load(file)
				if o.report(l) {
					return errFailed
				}
				t, err := target.ForCluster(cmd.Context(), o.cfg, cl, stateDir)
				if err != nil {
					return err
				}
				opts.Cluster, opts.Target = cl, t
			}
			srv, err := dashboard.New(opts)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return serveDashboard(ctx, o, srv, listen)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "a cluster file: show drift, values (sensitive ones masked), the plan and the file's plugin sources")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "the loopback address and port to serve on (port 0: any free port)")
	targetFlags(cmd, &target)
	stateDirFlag(cmd, &stateDir)
	return cmd
}

// loopbackListen refuses a --listen address that is not a loopback one: the
// dashboard acts with the user's credentials, for the user alone.
func loopbackListen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("invalid --listen %q: expected HOST:PORT, such as 127.0.0.1:8484", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("invalid --listen %q: the dashboard serves only on a loopback address (127.0.0.1, ::1 or localhost): it acts with your credentials", addr)
	}
	return nil
}

// serveDashboard serves srv on addr, prints its URL, and stops when ctx is.
func serveDashboard(ctx context.Context, o *options, srv *dashboard.Server, addr string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 2)
	go func() { errc <- srv.Run(ctx) }()
	go func() { errc <- hs.Serve(ln) }()
	_, _ = fmt.Fprintf(o.streams.Out, "dashboard: http://%s/\n", ln.Addr())
	_, _ = fmt.Fprintln(o.streams.Err, "kubeplug dashboard running; Ctrl-C stops it")
	select {
	case <-ctx.Done():
	case err := <-errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = hs.Close()
			return fmt.Errorf("dashboard: %w", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	return nil
}
