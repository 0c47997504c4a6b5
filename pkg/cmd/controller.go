package cmd

import (
	"fmt"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/controller"
	"github.com/kubeplug/kubeplug/pkg/dashboard"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

func newControllerCmd(o *options) *cobra.Command {
	var target action.KubeconfigTarget
	var withDashboard bool
	var kubernetesBins []string
	opts := controller.Options{}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run kubeplug's controller: installations, catalogs and fleets as Kubernetes resources",
		Long: `Run the controller: the same engine as apply and up, behind five resources of the
kubeplug.dev/v1alpha1 API (their CRDs are in api/controller/v1alpha1/crds of the kubeplug
repository; 'kubeplug controller manifests' prints them with a Deployment that
runs the controller in the cluster — run it there or here, not both):

  PluginCatalog       where plugin packages come from: https:// and oci:// catalogs,
                      or package archives held in a ConfigMap or Secret
  PluginInstallation  a cluster file's plugins section, kept installed in this
                      cluster or in a TargetCluster: install, upgrade, downgrade
                      (spec.allowDowngrade), rollback on failure, drift correction
                      every spec.interval, suspend, dependsOn, and uninstall in
                      reverse dependency order when it is deleted
  TargetCluster       another cluster, by a kubeconfig Secret
  PluginRollout       one installation per TargetCluster its selector matches,
                      moved to a new template a stage at a time (a canary, then
                      batches), halted by a cluster that fails
  ManagedCluster      a cluster the controller creates: a cluster file brought up
                      by the same code as 'kubeplug up' (the hosts provider, its
                      SSH key from a Secret), its kubeconfig published in a Secret
                      and a TargetCluster of its name; deleting it runs down

What the controller installs is recorded as the CLI records it, owned by the
installation: 'kubeplug status', 'history', 'rollback' and 'diff --live' work on
it, and neither the CLI nor another installation changes or removes it. The
controller holds a cluster's operation lease while it works there; a CLI run
waits for it or fails naming the controller.

With --shards N, every replica works: each target cluster belongs to one of N
shards by a stable hash of its namespace/name, and only the replica holding that
shard's Lease reconciles its installations; replicas share the shards fairly
and take over those of a replica that died once its Leases expire
(--leader-elect is then not used).

A ManagedCluster may use only the providers --cluster-providers names (hosts by
default): local would run the cluster inside the controller, aws deploys with
the controller's credentials. The hosts provider gets the node programs as
'kubeplug up' does (KUBEPLUG_LOCALNODE_BIN, KUBEPLUG_NODE_AGENT), from the
controller's environment, and the Kubernetes programs of each version it may run
from KUBEPLUG_LOCALCLUSTER_BIN and each --kubernetes-bin: a ManagedCluster's
spec.kubernetesVersion picks among them, and changing it upgrades the cluster
(the control-plane host first, then the workers one at a time; a downgrade or a
skipped minor version is refused, Stalled). The cluster's state (its PKI, the accepted host keys)
is kept in the Secret NAME-state (docs/controller.md).

The controller runs until interrupted (SIGINT, SIGTERM), then finishes what it
is doing (up to 30 s) and releases its leases.

With --dashboard, the pages of 'kubeplug dashboard' are served read-only under
/dashboard/ on the metrics address, live as there: the management cluster's
plugins, nodes, revisions and catalogs, read with the controller's own
credentials. They offer no action (the controller would act with its power, not
the viewer's: roll back with kubeplug rollback or kubeplug dashboard, as
yourself) and show no values. Whoever reaches the metrics port sees them.`,
		Example: `  # Run it in the cluster: its CRDs, RBAC and Deployment
  kubeplug controller manifests | kubectl apply -f -

  # Or run it here, on the current context: the CRDs only, then the controller
  kubectl apply -f api/controller/v1alpha1/crds/
  kubeplug controller

  # Two replicas in a cluster elect a leader
  kubeplug controller manifests --replicas 2 --image registry.example/kubeplug:v1 | kubectl apply -f -

  # Three replicas split the target clusters: six shards, two each (run each so)
  kubeplug controller --shards 6 --replica-id a`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rc, err := target.Config()
			if err != nil {
				return err
			}
			opts.Logger = o.cfg.Logger
			opts.Action = o.cfg
			for _, dir := range kubernetesBins {
				po, err := provider.FlagOptions("--kubernetes-bin", dir)
				if err != nil {
					return fmt.Errorf("--kubernetes-bin %s: %w", dir, err)
				}
				opts.ClusterProviderOptions = append(opts.ClusterProviderOptions, po...)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if withDashboard {
				if opts.MetricsAddr == "0" {
					return fmt.Errorf("--dashboard is served on the metrics address: give --metrics-bind-address other than %q", opts.MetricsAddr)
				}
				srv, err := dashboard.New(dashboard.Options{Config: o.cfg, Target: target, Logger: o.cfg.Logger, Base: "/dashboard/", ReadOnly: true, Remote: true})
				if err != nil {
					return err
				}
				opts.MetricsHandlers = map[string]http.Handler{"/dashboard/": srv}
				go func() { _ = srv.Run(ctx) }()
			}
			c, err := controller.New(rc, opts)
			if err != nil {
				return err
			}
			_, _ = fmt.Fprintln(o.streams.Err, "kubeplug controller running; Ctrl-C stops it")
			return c.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Namespace, "watch-namespace", "", "reconcile only this namespace's resources (default: all namespaces)")
	f.IntVar(&opts.Concurrency, "concurrency", 8, "how many installations reconcile at once")
	f.BoolVar(&opts.LeaderElection, "leader-elect", false, "elect one leader among replicas (a Lease in --leader-elect-namespace)")
	f.StringVar(&opts.LeaderElectionNamespace, "leader-elect-namespace", "kubeplug-system", "the namespace of the leader election Lease (and of the shard Leases)")
	f.IntVar(&opts.Shards, "shards", 1, "split the target clusters among replicas in this many shards (a Lease each); every replica gets the same value")
	f.StringSliceVar(&opts.ClusterProviders, "cluster-providers", controller.DefaultClusterProviders, "the providers a ManagedCluster may use")
	f.StringArrayVar(&kubernetesBins, "kubernetes-bin", nil, "a directory of kubeplug-localcluster of one Kubernetes version a ManagedCluster on the hosts provider may run, besides $KUBEPLUG_LOCALCLUSTER_BIN's (repeatable)")
	f.StringVar(&opts.ReplicaID, "replica-id", "", "this replica's name in the shard Leases (default: host name and process id)")
	cmd.MarkFlagsMutuallyExclusive("shards", "leader-elect")
	f.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", `where Prometheus metrics are served ("0": nowhere)`)
	f.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081", `where /healthz and /readyz are served ("0": nowhere)`)
	f.DurationVar(&opts.DefaultInterval, "interval", 10*time.Minute, "how often an installation without spec.interval is checked for drift")
	f.BoolVar(&withDashboard, "dashboard", false, "serve the dashboard's pages, read-only, under /dashboard/ on the metrics address")
	targetFlags(cmd, &target)
	cmd.AddCommand(newControllerManifestsCmd(o))
	return cmd
}

func newControllerManifestsCmd(o *options) *cobra.Command {
	var mo controller.ManifestOptions
	cmd := &cobra.Command{
		Use:   "manifests",
		Short: "Print what installs the controller: its CRDs, RBAC and Deployment",
		Long: `Print, as one YAML stream, the CustomResourceDefinitions of the controller's
resources and what runs it in a cluster: a Namespace, a ServiceAccount bound to
cluster-admin (it installs plugins, which may hold any kind of object) and a
Deployment of the kubeplug image running 'kubeplug controller'.`,
		Example: `  kubeplug controller manifests | kubectl apply -f -
  kubeplug controller manifests --image registry.example/kubeplug:v1 --replicas 2 > controller.yaml
  kubeplug controller manifests --replicas 3 --shards 6   # three replicas split the fleet`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := controller.Manifests(mo)
			if err != nil {
				return err
			}
			_, err = o.streams.Out.Write(b)
			return err
		},
	}
	cmd.Flags().StringVar(&mo.Namespace, "namespace", "kubeplug-system", "the namespace the controller runs in")
	cmd.Flags().StringVar(&mo.Image, "image", controller.DefaultImage, "the controller's image")
	cmd.Flags().IntVar(&mo.Replicas, "replicas", 1, "replicas (more than one elect a leader, unless --shards)")
	cmd.Flags().IntVar(&mo.Shards, "shards", 1, "split the target clusters among the replicas in this many shards (a Lease each, in --namespace) instead of electing a leader")
	return cmd
}
