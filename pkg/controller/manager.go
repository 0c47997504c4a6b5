package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/deploy/state"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/serving"
)

// Options configure the controller. The zero value of each field means its
// default.
type Options struct {
	// Logger receives what the controller does; discarded when nil.
	Logger *slog.Logger
	// Action is the base configuration of every action the controller runs
	// (built-in plugins, contrib and plugin directories); a new one when nil.
	Action *action.Config
	// Namespace limits the controller to one namespace; empty watches all.
	Namespace string
	// Concurrency is how many installations reconcile at once. Default 8.
	Concurrency int
	// LeaderElection makes replicas elect one leader (Lease
	// kubeplug-controller in LeaderElectionNamespace); only it reconciles.
	LeaderElection          bool
	LeaderElectionNamespace string
	// LeaderLease is how long a leader's lease lasts without renewal: how long
	// replicas wait for a leader that died. Default 15s.
	LeaderLease time.Duration
	// MetricsAddr and ProbeAddr are where metrics (/metrics) and health probes
	// (/healthz, /readyz) are served; "0" serves none. Defaults ":8080" and
	// ":8081".
	MetricsAddr, ProbeAddr string
	// MetricsHandlers are served beside /metrics on MetricsAddr, by path
	// (kubeplug controller --dashboard mounts the read-only dashboard there).
	MetricsHandlers map[string]http.Handler
	// WorkDir holds the catalogs the controller unpacks. Default a directory
	// under os.TempDir().
	WorkDir string
	// DefaultInterval is the drift-correcting interval of installations that set
	// none. Default 10m.
	DefaultInterval time.Duration
	// TargetResync is how often a TargetCluster's reachability and version are
	// read again. Default 1m.
	TargetResync time.Duration
	// LeaseIdle is how long the controller keeps a cluster's operation lease
	// after its last apply there, for the next one. Default 2s.
	LeaseIdle time.Duration
	// Shards, above 1, splits the fleet among replicas (see shards.go): each
	// target cluster is reconciled by the one replica holding its shard's
	// Lease in LeaderElectionNamespace, which lasts LeaderLease. Every
	// replica must be given the same Shards; it excludes LeaderElection.
	Shards int
	// ServingCerts says how long the serving CAs and certificates the
	// installations' applies issue live (action.Config.ServingCerts); zero
	// takes Action's. Installations are applied again when one is due
	// (renewal.go), so tests shorten them to see renewals.
	ServingCerts serving.Policy
	// ReplicaID names this replica in the shard Leases. Default the host name
	// and process id.
	ReplicaID string
	// ClusterProviders are the providers a ManagedCluster may name. Default
	// DefaultClusterProviders (hosts); a ManagedCluster of another is refused
	// with the condition ProviderNotAllowed.
	ClusterProviders []string
	// ClusterProviderOptions are given to the provider of every
	// ManagedCluster whose provider takes them (provider.Option.Provider):
	// the hosts provider's programs of each Kubernetes version (the
	// controller's --kubernetes-bin), which the cluster file's
	// spec.kubernetesVersion picks among.
	ClusterProviderOptions []provider.Option
	// ClusterRunner brings ManagedClusters up and down. Default action.Up and
	// action.Down with Action, what `kubeplug up` and `kubeplug down` run.
	ClusterRunner ClusterRunner
	// ClusterRetry is how long a ManagedCluster whose up or down failed waits
	// for the next try. Default 30s.
	ClusterRetry time.Duration
}

func (o *Options) defaults() error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Action == nil {
		o.Action = &action.Config{}
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = ":8080"
	}
	if o.ProbeAddr == "" {
		o.ProbeAddr = ":8081"
	}
	if o.LeaderElectionNamespace == "" {
		o.LeaderElectionNamespace = "kubeplug-system"
	}
	if o.LeaderLease <= 0 {
		o.LeaderLease = 15 * time.Second
	}
	if o.DefaultInterval <= 0 {
		o.DefaultInterval = 10 * time.Minute
	}
	if o.TargetResync <= 0 {
		o.TargetResync = time.Minute
	}
	if o.LeaseIdle <= 0 {
		o.LeaseIdle = 2 * time.Second
	}
	o.clusterDefaults()
	if o.Shards > 1 && o.LeaderElection {
		return errors.New("sharding (Shards above 1) and leader election exclude each other: every replica works, each on its shards")
	}
	if o.ReplicaID == "" {
		host, _ := os.Hostname()
		o.ReplicaID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if o.WorkDir == "" {
		o.WorkDir = filepath.Join(os.TempDir(), fmt.Sprintf("kubeplug-controller-%d", os.Getpid()))
	}
	return os.MkdirAll(o.WorkDir, 0o700)
}

// clusterDefaults are the defaults of the ManagedClusters' options.
func (o *Options) clusterDefaults() {
	if len(o.ClusterProviders) == 0 {
		o.ClusterProviders = DefaultClusterProviders
	}
	if o.ClusterRunner == nil {
		o.ClusterRunner = actionRunner{cfg: o.Action}
	}
	if o.ClusterRetry <= 0 {
		o.ClusterRetry = 30 * time.Second
	}
}

// Controller is kubeplug's controller: a controller-runtime manager with the
// reconcilers of the five resources.
type Controller struct {
	opts    Options
	mgr     manager.Manager
	targets *targets
	leases  *leases
	// shards is this replica's part of the fleet; nil when not sharded.
	shards *shards
}

// New returns a controller for the management cluster cfg talks to; Run starts it.
//
// Branches: controller-runtime's manager wiring: each step (schemes, cache,
// shards, probes, indexes, reconcilers) can fail and returns its error; there is
// no decision to split out.
func New(cfg *rest.Config, opts Options) (*Controller, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := ctrlv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	log := logr.FromSlogHandler(opts.Logger.Handler())
	setLoggerOnce.Do(func() { ctrl.SetLogger(log) }) // controller-runtime's caches log through its global logger
	mopts := ctrl.Options{
		Scheme:                        scheme,
		Logger:                        log,
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              "kubeplug-controller",
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &opts.LeaderLease,
		RenewDeadline:                 ptr(opts.LeaderLease * 2 / 3),
		RetryPeriod:                   ptr(max(opts.LeaderLease/5, 200*time.Millisecond)),
		Metrics:                       metricsserver.Options{BindAddress: opts.MetricsAddr, ExtraHandlers: opts.MetricsHandlers},
		HealthProbeBindAddress:        opts.ProbeAddr,
		GracefulShutdownTimeout:       ptr(30 * time.Second),
	}
	// Release records (kubeplug's and Helm's) are read from the target by
	// state, never from this cache: not caching them keeps the controller's
	// memory from growing with what it installed in its own cluster.
	mopts.Cache.ByObject = map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Field: fields.AndSelectors(
			fields.OneTermNotEqualSelector("type", string(state.RecordType)),
			fields.OneTermNotEqualSelector("type", "helm.sh/release.v1"))},
	}
	if opts.Namespace != "" {
		mopts.Cache.DefaultNamespaces = map[string]cache.Config{opts.Namespace: {}}
	}
	mcfg := rest.CopyConfig(cfg)
	if mcfg.QPS == 0 {
		// client-go's 20 requests/s (burst 30) would throttle the status and
		// finalizer writes of thousands of installations for minutes.
		mcfg.QPS, mcfg.Burst = 200, 400
	}
	mgr, err := ctrl.NewManager(mcfg, mopts)
	if err != nil {
		return nil, fmt.Errorf("set up the controller: %w", err)
	}
	c := &Controller{opts: opts, mgr: mgr}
	c.targets = newTargets(mgr.GetClient(), cfg)
	c.leases = newLeases(opts.LeaseIdle, opts.Logger)
	if opts.Shards > 1 {
		cs, err := kubernetes.NewForConfig(mcfg)
		if err != nil {
			return nil, err
		}
		c.shards = &shards{n: opts.Shards, id: opts.ReplicaID, namespace: opts.LeaderElectionNamespace, cs: cs,
			duration: opts.LeaderLease, log: opts.Logger, now: time.Now, held: map[int]time.Time{}}
		if err := mgr.Add(c.shards); err != nil {
			return nil, err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(context.Background(), &ctrlv1.PluginInstallation{}, refsIndex, installationRefs); err != nil {
		return nil, err
	}
	if err := idx.IndexField(context.Background(), &ctrlv1.PluginCatalog{}, refsIndex, catalogRefs); err != nil {
		return nil, err
	}
	if err := idx.IndexField(context.Background(), &ctrlv1.TargetCluster{}, refsIndex, targetRefs); err != nil {
		return nil, err
	}
	if err := idx.IndexField(context.Background(), &ctrlv1.ManagedCluster{}, refsIndex, managedClusterRefs); err != nil {
		return nil, err
	}
	copts := controller.Options{MaxConcurrentReconciles: opts.Concurrency, SkipNameValidation: ptr(true)}
	inst := &installationReconciler{c: c, client: mgr.GetClient(), events: mgr.GetEventRecorder("kubeplug-controller")}
	if err := inst.setup(mgr, copts); err != nil {
		return nil, err
	}
	if err := (&targetReconciler{c: c, client: mgr.GetClient()}).setup(mgr); err != nil {
		return nil, err
	}
	if err := (&catalogReconciler{c: c, client: mgr.GetClient()}).setup(mgr); err != nil {
		return nil, err
	}
	if err := (&rolloutReconciler{c: c, client: mgr.GetClient()}).setup(mgr); err != nil {
		return nil, err
	}
	if err := (&clusterReconciler{c: c, client: mgr.GetClient(), runner: opts.ClusterRunner}).setup(mgr); err != nil {
		return nil, err
	}
	return c, nil
}

// Run reconciles until ctx is done, then stops gracefully: in-flight
// reconciles finish (up to 30 s), the operation leases and the leader lease
// are released.
func (c *Controller) Run(ctx context.Context) error {
	defer c.leases.releaseAll() //nolint:contextcheck // ctx is done by then: the leases are released with a fresh, short timeout
	defer os.RemoveAll(c.opts.WorkDir)
	return c.mgr.Start(ctx)
}

// Elected is closed when this replica leads (at once without leader election).
func (c *Controller) Elected() <-chan struct{} { return c.mgr.Elected() }

func ptr[T any](v T) *T { return &v }

var setLoggerOnce sync.Once

// ownerOf is the owner recorded on the plugins an installation manages.
func ownerOf(o client.Object) string { return o.GetNamespace() + "/" + o.GetName() }

// owns says whether this replica reconciles what belongs to key
// ("namespace/name" of a target cluster, rollout or catalog; "" for the
// controller's own cluster): always, unless sharded.
func (c *Controller) owns(key string) bool { return c.shards.owns(key) }

// shardGained is a source of one event whenever this replica takes a shard
// (none when not sharded): the reconciler enqueues everything of its kind,
// which then reconciles what it owns, so that nothing waits for its next
// event after a handover.
func (c *Controller) shardGained(newList func() client.ObjectList, cl client.Client) source.Source {
	ch := make(chan event.GenericEvent, 1)
	if c.shards != nil {
		c.shards.gained = append(c.shards.gained, ch)
	}
	return source.Channel(ch, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return listRequests(ctx, cl, newList())
	}))
}
