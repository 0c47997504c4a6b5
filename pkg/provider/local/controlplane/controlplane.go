package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeplug/kubeplug/internal/portblock"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/clusterpki"
)

// Component names one process of the control plane. The values are the names
// of the binaries.
type Component string

// The components, in start order.
const (
	Etcd              Component = "etcd"
	APIServer         Component = "kube-apiserver"
	ControllerManager Component = "kube-controller-manager"
	Scheduler         Component = "kube-scheduler"
	Kwok              Component = "kwok"
)

// startOrder is also the reverse of the stop order.
var startOrder = []Component{Etcd, APIServer, ControllerManager, Scheduler, Kwok}

// ControlPlane is a running local control plane. Its methods are safe for
// concurrent use. A component that crashes after Start is not restarted (a test
// should see the failure, not have it papered over); LogPath tells why it died.
type ControlPlane struct {
	opts          Options
	log           *slog.Logger
	binDir        string
	dataDir       string
	removeDataDir bool
	pki           pki
	kubeconfig    string
	restConfig    *rest.Config
	client        kubernetes.Interface
	ports         map[Component]int
	etcdPeerPort  int
	// block is the port block the ports were taken from (package portblock),
	// held by this process until Stop (or, detached, until the components run:
	// the block is theirs while they live); nil for ports the caller fixed
	// outside one, or where no block could be reserved.
	block *portblock.Block
	// apiServerPortFixed: the API server's port was asked for or recorded
	// (choosePorts), so a taken one is an error, not a reason to move.
	apiServerPortFixed bool
	args               map[Component][]string

	// owned is set once Start chose the ports, so that a Start that failed
	// earlier (the data directory's cluster runs already, a port is taken)
	// does not overwrite the data directory's state.
	owned bool

	mu      sync.Mutex
	procs   map[Component]*process
	stopped bool
	nodeSeq map[string]int

	// nodes is the last LIST of the Nodes (readyNodes): concurrent waits for
	// Nodes share one per poll.
	nodes nodeList
}

// Start starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok on loopback ports of a port block of their own (docs/ports.md) and
// returns once the cluster is usable: the API server is ready, every component
// reports healthy and the "default" service account exists, so Pods can be
// created. Nodes are added with AddNodes.
//
// Start is bounded by ctx and by opts.StartTimeout. On error, everything it
// started is stopped again and a temporary data directory removed. The caller
// must call Stop on success.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	began := time.Now()
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	binDir, err := FindBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	c := &ControlPlane{
		opts:    opts,
		log:     opts.Logger,
		binDir:  binDir,
		dataDir: opts.DataDir,
		procs:   map[Component]*process{},
		nodeSeq: map[string]int{},
		args:    map[Component][]string{},
	}
	if c.dataDir == "" {
		if c.dataDir, err = os.MkdirTemp("", "kubeplug-controlplane-"); err != nil {
			return nil, fmt.Errorf("create data directory: %w", err)
		}
		c.removeDataDir = !opts.KeepDataDir
	} else if c.dataDir, err = filepath.Abs(c.dataDir); err != nil {
		return nil, fmt.Errorf("resolve data directory %q: %w", opts.DataDir, err)
	}
	if err := c.start(ctx); err != nil {
		// Clean up with a fresh context: ctx may be the reason we failed.
		stopCtx, stopCancel := context.WithTimeout(context.WithoutCancel(ctx), 2*opts.StopGracePeriod)
		defer stopCancel()
		if stopErr := c.Stop(stopCtx); stopErr != nil {
			c.log.Warn("stop after failed start", "err", stopErr)
		}
		return nil, err
	}
	if c.opts.Detach && c.block != nil {
		// The running components own the block now (their state names them):
		// nothing of it need stay open in this process.
		c.block.Release()
	}
	c.log.Info("control plane ready", "duration", time.Since(began), "kubeconfig", c.kubeconfig, "datadir", c.dataDir)
	return c, nil
}

// start prepares and starts the control plane's components, records its
// state, and makes the default namespace's service account.
func (c *ControlPlane) start(ctx context.Context) error {
	if err := c.prepare(); err != nil {
		return err
	}
	if err := c.startComponents(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	err := c.saveStateLocked()
	c.mu.Unlock()
	if err != nil {
		return err
	}
	// The ServiceAccount admission plugin rejects Pods in a namespace without
	// its "default" service account. The controller manager's service account
	// controller makes it, once its informers have synced (0.2–0.7 s after the
	// controller manager is healthy, on a busy machine): made here, it need
	// not be waited for. The controller finds it there and leaves it; the
	// other namespaces' are still its.
	return c.poll(ctx, ControllerManager, "default service account", func(ctx context.Context) error {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: metav1.NamespaceDefault}}
		_, err := c.client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Create(ctx, sa, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err // the namespace not made yet, say: tried again
	})
}

// prepare makes what the components start from: the log directory, the PKI,
// the ports, the kubeconfig, kwok's stages and the components' arguments.
func (c *ControlPlane) prepare() error {
	if err := os.MkdirAll(filepath.Join(c.dataDir, "logs"), 0o755); err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}
	svcIP, err := firstIP(c.opts.ServiceClusterIPRange)
	if err != nil {
		return err
	}
	pkiDir := c.opts.PKIDir
	if pkiDir == "" {
		pkiDir = filepath.Join(c.dataDir, "pki")
	}
	if c.pki, err = ensurePKI(pkiDir, svcIP); err != nil {
		return err
	}
	if err := c.choosePorts(); err != nil {
		return err
	}
	if portsChosen != nil {
		portsChosen(c)
	}
	c.owned = true
	if err := c.writeKubeconfig(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.dataDir, kwokStagesFile), kwokStages, 0o600); err != nil {
		return fmt.Errorf("write kwok's stages: %w", err)
	}
	c.buildArgs()
	return nil
}

// startComponents starts the components and waits until each is ready.
// etcd and the API server start together (issue 42: `up` toward 3 s): the API
// server's own start (loading its certificates, building its admission chain
// and API groups) overlaps etcd's, and its etcd client connects once etcd
// listens, as a kubelet starts the two static Pods of a kubeadm node
// together. etcd is waited for first; when it had to move to another port
// (onFreshPort), the API server, whose command line named the old one, is
// started again.
//
// The scheduler and kwok start as soon as the API server serves, not once it
// is ready: between the two its post-start hooks run (the system priority
// classes alone wait a fixed second before their first try, the RBAC roles
// take up to seconds on a loaded machine), and their own starts fill that
// time. Not earlier: kwok retries its first LIST after 1, 2, 4… s. The
// controller manager starts once the API server is ready, as before: it looks
// at the API server's /healthz once a second until it is ok, only then starts
// its controllers, so started earlier its controllers (which every
// Deployment waits on) would start up to a second after the API server is
// ready instead of at once; and without a request-header CA file on its
// command line (kubeadm's and the control-plane plugin's name none) it looks
// the CA up in the cluster at once and exits when the API server does not
// answer. Readiness is waited for in the same order as ever: the API
// server's, then each of the rest's.
func (c *ControlPlane) startComponents(ctx context.Context) error {
	began := time.Now()
	c.tell(Etcd, ComponentStarting, began)
	err := c.startComponent(Etcd)
	etcdPort := c.ports[Etcd]
	if err == nil {
		c.tell(APIServer, ComponentStarting, began)
		err = c.startComponent(APIServer)
	}
	if err == nil {
		err = c.waitReady(ctx, Etcd)
	}
	if err = c.onFreshPort(ctx, Etcd, err, c.waitReady); err != nil {
		return err
	}
	c.tell(Etcd, ComponentReady, began)
	c.mu.Lock()
	apiStarted := c.procs[APIServer] != nil
	c.mu.Unlock()
	if c.ports[Etcd] != etcdPort || !apiStarted {
		if err := c.startAgain(ctx, APIServer); err != nil {
			return err
		}
	}
	if err := c.onFreshPort(ctx, APIServer, c.waitServing(ctx, APIServer), c.waitServing); err != nil {
		return err
	}
	early := []Component{Scheduler, Kwok}
	started := map[Component]time.Time{}
	for _, comp := range early {
		started[comp] = time.Now()
		c.tell(comp, ComponentStarting, started[comp])
		if err := c.startComponent(comp); err != nil {
			return err
		}
	}
	if err := c.onFreshPort(ctx, APIServer, c.waitReady(ctx, APIServer), c.waitReady); err != nil {
		return err
	}
	c.tell(APIServer, ComponentReady, began)
	started[ControllerManager] = time.Now()
	c.tell(ControllerManager, ComponentStarting, started[ControllerManager])
	if err := c.startComponent(ControllerManager); err != nil {
		return err
	}
	if err := c.startExitedAgain(ctx, early); err != nil {
		return err
	}
	for _, comp := range []Component{ControllerManager, Scheduler, Kwok} {
		if err := c.onFreshPort(ctx, comp, c.waitReady(ctx, comp), c.waitReady); err != nil {
			return err
		}
		c.tell(comp, ComponentReady, started[comp])
	}
	return nil
}

// startExitedAgain starts again, once, each of comps that exited while the
// API server was not yet ready, other than for a taken port (onFreshPort's
// case): kwok gives up when its LIST of Nodes fails for ~30 s, which the
// post-start hooks of a very loaded machine could exceed. Started again now,
// it finds the API server ready, as it did when it was started only then. One
// that exits again fails Start with its log.
func (c *ControlPlane) startExitedAgain(ctx context.Context, comps []Component) error {
	for _, comp := range comps {
		c.mu.Lock()
		p := c.procs[comp]
		c.mu.Unlock()
		if p == nil {
			continue
		}
		exited, exitErr := p.exited()
		if !exited || strings.Contains(tail(c.LogPath(comp), 2048), "address already in use") {
			continue
		}
		c.log.Warn("a component exited before the API server was ready; starting it again", "component", comp, "error", exitErr, "log", c.LogPath(comp))
		if err := c.startAgain(ctx, comp); err != nil {
			return err
		}
	}
	return nil
}

// startAgain stops comp, when it runs, and starts it with its current command
// line, without waiting for it.
func (c *ControlPlane) startAgain(ctx context.Context, comp Component) error {
	if err := c.forget(ctx, comp); err != nil {
		return err
	}
	c.tell(comp, ComponentStarting, time.Now())
	return c.startComponent(comp)
}

// forget stops comp's process, when it runs, and removes it from the running
// ones.
func (c *ControlPlane) forget(ctx context.Context, comp Component) error {
	c.mu.Lock()
	p := c.procs[comp]
	delete(c.procs, comp)
	c.mu.Unlock()
	if p != nil {
		if err := p.stop(ctx, c.opts.StopGracePeriod); err != nil {
			return fmt.Errorf("stop %s: %w", comp, err)
		}
	}
	return nil
}

// portsChosen, when set (by tests), is called once start has chosen the ports
// and before any component binds one.
var portsChosen func(*ControlPlane)

// portAttempts bounds how many ports onFreshPort tries for one component.
const portAttempts = 3

// onFreshPort returns err, comp's failure to start, unless comp could not bind
// a port that was chosen for it — another process took the free port between
// the choice and the bind, which a machine running many clusters and tests
// sees — and that port was not one the caller fixed: comp is then started
// again on a newly chosen port (the later components' command lines follow),
// up to portAttempts times in all, each start waited for by wait.
func (c *ControlPlane) onFreshPort(ctx context.Context, comp Component, err error, wait func(context.Context, Component) error) error {
	for attempt := 1; err != nil && attempt < portAttempts && strings.Contains(err.Error(), "address already in use") && !c.portFixed(comp); attempt++ {
		c.log.Warn("a port chosen for a component was taken before it bound it; choosing another", "component", comp, "error", err)
		if err := c.forget(ctx, comp); err != nil {
			return err
		}
		if err := c.choosePortAgain(comp); err != nil {
			return err
		}
		if err = c.startComponent(comp); err == nil {
			err = wait(ctx, comp)
		}
	}
	return err
}

// portFixed says whether comp's port is one the caller or the cluster's
// record fixed (Options.Ports, Options.APIServerPort, a detached cluster's
// API server, which its kubeconfigs name).
func (c *ControlPlane) portFixed(comp Component) bool {
	return c.opts.Ports != nil || (comp == APIServer && c.apiServerPortFixed)
}

// choosePortAgain gives comp a new free port (etcd new client and peer
// ports), not one another component has, and rebuilds what names it: the
// command lines and, for the API server, the kubeconfig and client.
func (c *ControlPlane) choosePortAgain(comp Component) error {
	taken := map[int]bool{c.etcdPeerPort: true}
	for _, p := range c.ports {
		taken[p] = true
	}
	keys := []string{string(comp)}
	if comp == Etcd {
		keys = append(keys, etcdPeer)
	}
	for range 10 {
		got, err := allocatePorts(keys, nil, nil, c.block, taken)
		if err != nil {
			return fmt.Errorf("start %s: %w", comp, err)
		}
		if slices.ContainsFunc(keys, func(k string) bool { return taken[got[k]] }) {
			continue
		}
		c.ports[comp] = got[string(comp)]
		if comp == Etcd {
			c.etcdPeerPort = got[etcdPeer]
		}
		c.buildArgs()
		if comp == APIServer {
			return c.writeKubeconfig()
		}
		return nil
	}
	return fmt.Errorf("start %s: no free loopback port found", comp)
}

// RESTConfig returns a new copy of the cluster-admin client configuration. Its
// QPS and Burst are raised (200/400) because the cluster serves one user on
// loopback; change them on the copy if a test needs client-side throttling.
func (c *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// KubeconfigPath is the cluster-admin kubeconfig file, for kubectl and for other
// processes. It is rewritten by every Start.
func (c *ControlPlane) KubeconfigPath() string { return c.kubeconfig }

// DataDir is the directory with etcd data, certificates, kubeconfig and logs.
func (c *ControlPlane) DataDir() string { return c.dataDir }

// LogPath is the file a component's output is appended to.
func (c *ControlPlane) LogPath(comp Component) string {
	return filepath.Join(c.dataDir, "logs", string(comp)+".log")
}

// BinDir is the directory the component binaries were run from.
func (c *ControlPlane) BinDir() string { return c.binDir }

// Host is the API server URL, https://127.0.0.1:PORT.
func (c *ControlPlane) Host() string { return c.restConfig.Host }

// ProcessGroups returns the process group id of every running component (which
// is also its pid). Tests use it to check that Stop left nothing behind.
func (c *ControlPlane) ProcessGroups() map[Component]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[Component]int, len(c.procs))
	for comp, p := range c.procs {
		out[comp] = p.pid()
	}
	return out
}

// Restart stops one component (SIGTERM, then SIGKILL after the grace period),
// starts it again with the same flags and ports, and waits until it is healthy
// again. Clients see the outage and must recover by themselves: that is what
// fault tests want to observe.
func (c *ControlPlane) Restart(ctx context.Context, comp Component) error {
	return c.restart(ctx, comp, c.opts.StopGracePeriod)
}

func (c *ControlPlane) restart(ctx context.Context, comp Component, grace time.Duration) error {
	if _, ok := c.ports[comp]; !ok {
		return fmt.Errorf("restart %q: %w", comp, ErrUnknownComponent)
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return fmt.Errorf("restart %s: %w", comp, ErrStopped)
	}
	p := c.procs[comp]
	delete(c.procs, comp)
	c.mu.Unlock()
	if p != nil {
		if err := p.stop(ctx, grace); err != nil {
			return fmt.Errorf("restart %s: %w", comp, err)
		}
	}
	c.log.Info("component stopped for restart", "component", comp)
	began := time.Now()
	c.tell(comp, ComponentRestarting, began)
	// A process killed while stuck (its leader already a zombie, other threads
	// still exiting) may hold its port a moment longer.
	c.waitPortFree(ctx, c.ports[comp])
	if err := c.startComponent(comp); err != nil {
		return fmt.Errorf("restart %s: %w", comp, err)
	}
	if err := c.waitReady(ctx, comp); err != nil {
		return fmt.Errorf("restart %s: %w", comp, err)
	}
	c.tell(comp, ComponentReady, began)
	return nil
}

// ComponentState is what a ComponentEvent says of its component.
type ComponentState string

// Component states, in the order a start or a restart goes through them.
const (
	ComponentStarting   ComponentState = "starting"
	ComponentRestarting ComponentState = "restarting"
	ComponentReady      ComponentState = "ready"
)

// ComponentEvent tells Options.Progress how a component's start or restart goes.
type ComponentEvent struct {
	Component Component
	State     ComponentState
	// Elapsed is how long the start or restart has taken so far.
	Elapsed time.Duration
}

// tell sends Options.Progress an event about comp, whose start began then.
func (c *ControlPlane) tell(comp Component, state ComponentState, began time.Time) {
	if c.opts.Progress != nil {
		c.opts.Progress(ComponentEvent{Component: comp, State: state, Elapsed: time.Since(began)})
	}
}

// Stop stops all components in reverse start order, each with SIGTERM to its
// process group and SIGKILL after the grace period or when ctx is done, and
// removes a temporary data directory. It waits until every process is reaped.
// Stop is idempotent; calls after the first return nil.
func (c *ControlPlane) Stop(ctx context.Context) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	procs := c.procs
	c.procs = map[Component]*process{}
	c.mu.Unlock()

	var errs []error
	for i := len(startOrder) - 1; i >= 0; i-- {
		comp := startOrder[i]
		p := procs[comp]
		if p == nil {
			continue
		}
		if err := p.stop(ctx, c.opts.StopGracePeriod); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", comp, err))
			continue
		}
		c.log.Debug("component stopped", "component", comp)
	}
	if c.opts.Detach && len(errs) == 0 {
		c.mu.Lock()
		if err := c.saveStateLocked(); err != nil {
			errs = append(errs, err)
		}
		c.mu.Unlock()
	}
	if c.block != nil {
		c.block.Release()
	}
	if c.removeDataDir && len(errs) == 0 {
		if err := os.RemoveAll(c.dataDir); err != nil {
			errs = append(errs, fmt.Errorf("remove data directory %s: %w", c.dataDir, err))
		}
	}
	c.log.Info("control plane stopped", "datadir", c.dataDir, "removed", c.removeDataDir && len(errs) == 0)
	return errors.Join(errs...)
}

// buildArgs computes every component's command line once, so that Restart
// reuses it exactly.
func (c *ControlPlane) buildArgs() { c.args = c.computeArgs(c.opts) }

// computeArgs renders every component's command line from o, the ports
// and paths.
func (c *ControlPlane) computeArgs(o Options) map[Component][]string {
	p := c.pki.path
	loopback := "127.0.0.1"
	args := map[Component][]string{}
	args[Etcd] = buildArgs([]flag{
		{"name", "kubeplug"},
		{"data-dir", filepath.Join(c.dataDir, "etcd")},
		{"listen-client-urls", c.etcdURL()},
		{"advertise-client-urls", c.etcdURL()},
		{"listen-peer-urls", "http://" + net.JoinHostPort(loopback, strconv.Itoa(c.etcdPeerPort))},
		{"unsafe-no-fsync", strconv.FormatBool(!o.EtcdFsync)},
		{"log-level", "warn"},
	}, nil, nil)
	args[APIServer] = buildArgs([]flag{
		{"advertise-address", loopback},
		{"bind-address", loopback},
		{"secure-port", strconv.Itoa(c.ports[APIServer])},
		{"cert-dir", filepath.Join(c.dataDir, "apiserver")},
		{"tls-cert-file", p(clusterpki.APIServerCert)},
		{"tls-private-key-file", p(clusterpki.APIServerKey)},
		{"client-ca-file", p(clusterpki.CACert)},
		{"etcd-servers", c.etcdURL()},
		// The "kubernetes" Service cannot have a loopback endpoint, and nothing
		// in a simulated cluster could reach it anyway.
		{"endpoint-reconciler-type", "none"},
		{"authorization-mode", "Node,RBAC"},
		{"allow-privileged", "true"},
		{"service-cluster-ip-range", o.ServiceClusterIPRange},
		{"service-account-issuer", "https://kubernetes.default.svc.cluster.local"},
		{"service-account-key-file", p(clusterpki.SAPub)},
		{"service-account-signing-key-file", p(clusterpki.SAKey)},
		// Front-proxy identity, so aggregated API servers (APIService) work.
		{"requestheader-client-ca-file", p(clusterpki.FrontProxyCACert)},
		{"requestheader-allowed-names", clusterpki.FrontProxyClientName},
		{"requestheader-username-headers", "X-Remote-User"},
		{"requestheader-group-headers", "X-Remote-Group"},
		{"requestheader-extra-headers-prefix", "X-Remote-Extra-"},
		{"proxy-client-cert-file", p(clusterpki.FrontProxyCert)},
		{"proxy-client-key-file", p(clusterpki.FrontProxyKey)},
		{"profiling", "false"},
	}, o.APIServerFlags, o.FeatureGates)
	args[ControllerManager] = buildArgs([]flag{
		{"kubeconfig", c.kubeconfig},
		{"authentication-kubeconfig", c.kubeconfig},
		{"authorization-kubeconfig", c.kubeconfig},
		{"bind-address", loopback},
		{"secure-port", strconv.Itoa(c.ports[ControllerManager])},
		{"tls-cert-file", p(clusterpki.ServingCert)},
		{"tls-private-key-file", p(clusterpki.ServingKey)},
		// One instance: leader election would only delay start and restarts.
		{"leader-elect", "false"},
		{"root-ca-file", p(clusterpki.CACert)},
		{"service-account-private-key-file", p(clusterpki.SAKey)},
		{"cluster-signing-cert-file", p(clusterpki.CACert)},
		{"cluster-signing-key-file", p(clusterpki.CAKey)},
		{"service-cluster-ip-range", o.ServiceClusterIPRange},
		{"profiling", "false"},
	}, o.ControllerManagerFlags, o.FeatureGates)
	args[Scheduler] = buildArgs([]flag{
		{"kubeconfig", c.kubeconfig},
		{"authentication-kubeconfig", c.kubeconfig},
		{"authorization-kubeconfig", c.kubeconfig},
		{"bind-address", loopback},
		{"secure-port", strconv.Itoa(c.ports[Scheduler])},
		{"tls-cert-file", p(clusterpki.ServingCert)},
		{"tls-private-key-file", p(clusterpki.ServingKey)},
		{"leader-elect", "false"},
	}, o.SchedulerFlags, o.FeatureGates)
	// The caller's complete command lines replace everything above.
	for comp, a := range o.Args {
		args[comp] = slices.Clone(a)
	}
	args[Kwok] = buildArgs([]flag{
		{"kubeconfig", c.kubeconfig},
		{"manage-all-nodes", "false"},
		{"manage-nodes-with-annotation-selector", KwokNodeAnnotation + "=fake"},
		{"server-address", net.JoinHostPort(loopback, strconv.Itoa(c.ports[Kwok]))},
		{"cidr", o.PodCIDR},
		{"node-lease-duration-seconds", "40"},
		{"config", filepath.Join(c.dataDir, kwokStagesFile)},
	}, nil, nil)
	return args
}

// firstIP is the first address of a CIDR, the one the "kubernetes" Service
// gets.
func firstIP(cidr string) (net.IP, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("parse service range %q: %w", cidr, err)
	}
	ip := n.IP.To4()
	if ip == nil {
		ip = n.IP.To16()
	}
	ip = append(net.IP(nil), ip...)
	ip[len(ip)-1]++
	return ip, nil
}

// choosePorts picks every component's port: Options.Ports, else the API
// server's from Options.APIServerPort or a detached cluster's record, the
// others from the record when still free. A detached data directory whose
// control plane still runs is ErrRunning.
func (c *ControlPlane) choosePorts() error {
	st, err := readState(c.dataDir)
	if err != nil {
		return err
	}
	if st != nil {
		if alive := st.alive(); len(alive) > 0 {
			return fmt.Errorf("start control plane in %s: %w (pids %v)", c.dataDir, ErrRunning, pids(alive))
		}
	}
	c.apiServerPortFixed = c.opts.APIServerPort != 0 || (st != nil && st.Ports[string(APIServer)] != 0)
	if c.opts.Ports != nil {
		// Ports ChoosePorts took from the block it holds for this data directory.
		c.block = portblock.Held(c.dataDir)
	} else {
		c.block = acquireBlock(c.log, c.dataDir, st)
	}
	ports, err := choosePorts(st, c.opts.APIServerPort, c.opts.Ports, c.block)
	if err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	c.ports = ports.Components
	c.etcdPeerPort = ports.EtcdPeer
	return nil
}

func pids(procs map[Component]*process) map[Component]int {
	out := map[Component]int{}
	for comp, p := range procs {
		out[comp] = p.pid()
	}
	return out
}

func (c *ControlPlane) etcdURL() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ports[Etcd]))
}

func (c *ControlPlane) startComponent(comp Component) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return fmt.Errorf("start %s: %w", comp, ErrStopped)
	}
	if c.block != nil {
		// The block's listener kept the port until now: the component binds it.
		c.block.Hand(c.ports[comp])
		if comp == Etcd {
			c.block.Hand(c.etcdPeerPort)
		}
	}
	p, err := startProcess(filepath.Join(c.binDir, string(comp)), c.args[comp], c.LogPath(comp), c.opts.Detach)
	if err != nil {
		return err
	}
	c.procs[comp] = p
	if err := c.saveStateLocked(); err != nil {
		return err
	}
	c.log.Debug("component started", "component", comp, "pid", p.pid(), "port", c.ports[comp])
	return nil
}

// waitReady polls comp's health endpoint until it answers ok.
func (c *ControlPlane) waitReady(ctx context.Context, comp Component) error {
	began := time.Now()
	var check func(ctx context.Context) error
	switch comp {
	case Etcd:
		check = c.httpCheck(http.DefaultClient, c.etcdURL()+"/health", `"health":"true"`)
	case APIServer:
		hc, err := rest.HTTPClientFor(c.restConfig)
		if err != nil {
			return fmt.Errorf("build api server client: %w", err)
		}
		check = c.httpCheck(hc, c.restConfig.Host+"/readyz", "ok")
	case ControllerManager, Scheduler:
		hc, err := c.loopbackTLSClient()
		if err != nil {
			return err
		}
		check = c.httpCheck(hc, "https://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ports[comp]))+"/healthz", "ok")
	case Kwok:
		check = c.httpCheck(http.DefaultClient, "http://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ports[comp]))+"/healthz", "ok")
	default:
		return fmt.Errorf("wait for %q: %w", comp, ErrUnknownComponent)
	}
	if err := c.poll(ctx, comp, "health", check); err != nil {
		return err
	}
	c.log.Info("component ready", "component", comp, "duration", time.Since(began))
	return nil
}

// waitServing polls the API server comp until it serves: its /readyz answers
// over TLS with the cluster's CA, whatever it says (not ready while its
// post-start hooks run).
func (c *ControlPlane) waitServing(ctx context.Context, comp Component) error {
	hc, err := rest.HTTPClientFor(c.restConfig)
	if err != nil {
		return fmt.Errorf("build api server client: %w", err)
	}
	url := c.restConfig.Host + "/readyz"
	return c.poll(ctx, comp, "serving", func(ctx context.Context) error {
		_, _, err := getHealth(ctx, hc, url)
		return err
	})
}

// Polls start pollFirst apart and double up to pollMax: a component or Node
// that is ready within a few tens of milliseconds is seen so, one that takes
// seconds (the API server) costs a check every pollMax.
const (
	pollFirst = 10 * time.Millisecond
	pollMax   = 100 * time.Millisecond
)

// poll runs check until it succeeds, ctx is done or comp exits: at once, then
// pollFirst apart, doubling up to pollMax. The error names the last failure
// and, if comp exited, the tail of its log.
func (c *ControlPlane) poll(ctx context.Context, comp Component, what string, check func(context.Context) error) error {
	interval := pollFirst
	timer := time.NewTimer(interval)
	defer timer.Stop()
	var last error
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(attemptCtx)
		cancel()
		if last == nil {
			return nil
		}
		c.mu.Lock()
		p := c.procs[comp]
		c.mu.Unlock()
		if p != nil {
			if exited, exitErr := p.exited(); exited {
				if exitErr == nil {
					exitErr = errors.New("exit status 0")
				}
				return fmt.Errorf("wait for %s %s: %w (%w); log %s ends with:\n%s",
					comp, what, ErrComponentExited, exitErr, c.LogPath(comp), tail(c.LogPath(comp), 2048))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s %s (last error: %w): %w", comp, what, last, ctx.Err())
		case <-timer.C:
		}
		interval = min(2*interval, pollMax)
		timer.Reset(interval)
	}
}

func (c *ControlPlane) httpCheck(hc *http.Client, url, want string) func(context.Context) error {
	return func(ctx context.Context) error {
		status, body, err := getHealth(ctx, hc, url)
		if err != nil {
			return err
		}
		if status != http.StatusOK || !strings.Contains(string(body), want) {
			return fmt.Errorf("get %s: status %d: %s", url, status, healthSummary(string(body)))
		}
		return nil
	}
}

// getHealth GETs a health endpoint and returns its status and the first 64 KiB
// of its answer; an error only when nothing was answered.
func getHealth(ctx context.Context, hc *http.Client, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("build request %s: %w", url, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("get %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", url, err)
	}
	return resp.StatusCode, body, nil
}

// healthSummary shortens a health endpoint's answer for an error: of a verbose
// /readyz or /livez (one "[+]check ok" or "[-]check failed" line per check, ~40
// lines) only the failed checks, else its first line, at most 200 bytes.
func healthSummary(body string) string {
	var failed []string
	for line := range strings.Lines(body) {
		if c, ok := strings.CutPrefix(strings.TrimSpace(line), "[-]"); ok {
			failed = append(failed, c)
		}
	}
	s := strings.TrimSpace(body)
	if len(failed) > 0 {
		s = "failed: " + strings.Join(failed, "; ")
	} else if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// loopbackTLSClient trusts the local CA, which signed the components' serving
// certificates.
func (c *ControlPlane) loopbackTLSClient() (*http.Client, error) {
	pem, err := os.ReadFile(c.pki.path(clusterpki.CACert))
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("parse CA %s: no certificate", c.pki.path(clusterpki.CACert))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}

// writeKubeconfig writes a self-contained cluster-admin kubeconfig (certificates
// embedded) and builds the REST config and client from it.
func (c *ControlPlane) writeKubeconfig() error {
	server := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ports[APIServer]))
	c.kubeconfig = filepath.Join(c.dataDir, "kubeconfig")
	cfg, err := clusterpki.WriteAdminKubeconfig(c.pki.dir, server, c.opts.ContextName, c.kubeconfig, c.opts.ComponentKubeconfig)
	if err != nil {
		return err
	}
	return c.connect(cfg)
}

// Connect is a ControlPlane for an API server this process neither started
// nor attached to (one that runs as a static Pod on a control-plane machine),
// reached with the cluster-admin kubeconfig at path: its node and REST-config
// methods work; it has no processes to wait for, stop or reconfigure.
func Connect(path string) (*ControlPlane, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", path, err)
	}
	c := &ControlPlane{kubeconfig: path, log: slog.New(slog.DiscardHandler), procs: map[Component]*process{}}
	if err := c.connect(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// connect builds the REST config and client from cfg.
func (c *ControlPlane) connect(cfg *clientcmdapi.Config) error {
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("build rest config from %s: %w", c.kubeconfig, err)
	}
	rc.QPS, rc.Burst = 200, 400
	c.restConfig = rc
	if c.client, err = kubernetes.NewForConfig(rc); err != nil {
		return fmt.Errorf("build client: %w", err)
	}
	return nil
}

// tail returns up to the last n bytes of a file, for error messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer func() { _ = f.Close() }()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(-n, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
