package local

import (
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
)

// Labels and taints the provider puts on Nodes.
const (
	// PoolLabel carries the Node's pool name; it is how Up finds the Nodes it
	// made.
	PoolLabel = "kubeplug.dev/pool"
	// ControlPlaneRoleLabel marks the control-plane Node, as kubeadm does.
	ControlPlaneRoleLabel = "node-role.kubernetes.io/control-plane"
	// ControlPlaneNode is the name of the control plane's machine and Node.
	ControlPlaneNode = model.ControlPlanePool + "-0"
)

// Provider is the local provider. Its methods must not be called concurrently.
type Provider struct {
	opts Options
	log  *slog.Logger
	cp   *controlplane.ControlPlane // set by Up or attach
	// rollMu lets one machine at a time be replaced (machines.go);
	// rollFailed names the machine whose replacement failed in this Up.
	rollMu     sync.Mutex
	rollFailed string
	// ports are the ones the last Facts chose; Up starts the control plane on them.
	ports *controlplane.Ports
	// cpNet is the node network the last Facts chose for a control plane on
	// a machine (cpmachine.go); Up records it.
	cpNet *realnode.Network
	// binDir holds the binaries of the cluster's Kubernetes version, once
	// CheckKubernetesVersion resolved it (versions.go).
	binDir string
	// binVersion is the Kubernetes version of binDir.
	binVersion string
	// upgradeFrom is the version the running cluster is upgraded from by the
	// current Up; empty when it does not change version.
	upgradeFrom string
	// onDemand are the on-demand built-in images the current Up pushes
	// (preflightOnDemand).
	onDemand []onDemandImage
	// held says the run holds the state dir's lock (Lock): the methods do not
	// take it again.
	held bool
	// haCount is the number of control-plane machines of the current Up
	// when more than one (ha.go).
	haCount int
}

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Locker   = (*Provider)(nil)
)

// New checks opts. It starts nothing.
func New(opts Options) (*Provider, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Provider{opts: opts, log: opts.Logger}, nil
}

// StateDir is the state directory in use.
func (p *Provider) StateDir() string { return p.opts.StateDir }

func (p *Provider) event(step, node, msg string) {
	p.opts.Events(provider.Event{Time: time.Now(), Step: step, Node: node, Message: msg})
	p.log.Info("progress", "step", step, "node", node, "message", msg)
}

// nodeEvent is event for one of the nodes the node step works on at once
// (provider.Event.Item); an empty msg only ends the item.
func (p *Provider) nodeEvent(node, item, msg string, done bool) {
	p.opts.Events(provider.Event{Time: time.Now(), Step: "node", Node: node, Item: item, Message: msg, Done: done})
	if msg != "" {
		p.log.Info("progress", "step", "node", "node", node, "message", msg)
	}
}

// componentEvent tells the user how a control-plane component's start goes.
func (p *Provider) componentEvent(e controlplane.ComponentEvent) {
	msg := string(e.Component) + " " + string(e.State)
	if e.State == controlplane.ComponentReady {
		msg += " in " + e.Elapsed.Round(time.Millisecond).String()
	}
	p.opts.Events(provider.Event{Time: time.Now(), Step: "control-plane", Item: string(e.Component), Message: msg, Done: e.State == controlplane.ComponentReady})
	p.log.Debug("progress", "step", "control-plane", "component", e.Component, "state", e.State)
}

func (p *Provider) cpOptions() controlplane.Options {
	return controlplane.Options{
		BinDir:          p.binDirOrDefault(),
		DataDir:         filepath.Join(p.opts.StateDir, controlPlaneDir),
		Detach:          true,
		APIServerPort:   p.opts.APIServerPort,
		ContextName:     "kubeplug-" + p.opts.ClusterName,
		StopGracePeriod: p.opts.StopGracePeriod,
		Logger:          p.log,
		Progress:        p.componentEvent,
		// Where the flags of the control-plane plugin (Facts) find them.
		PKIDir:              underRoot(p.machineRoot(ControlPlaneNode), factPKIDir),
		ComponentKubeconfig: underRoot(p.machineRoot(ControlPlaneNode), factKubeconfig),
	}
}

// checkFacts says whether the static Pods were rendered with the provider's
// ports: the control plane must serve where the provider looks for it.
func checkFacts(args map[controlplane.Component][]string, ports controlplane.Ports) error {
	want := map[controlplane.Component][2]string{
		controlplane.APIServer:         {"secure-port", strconv.Itoa(ports.Components[controlplane.APIServer])},
		controlplane.ControllerManager: {"secure-port", strconv.Itoa(ports.Components[controlplane.ControllerManager])},
		controlplane.Scheduler:         {"secure-port", strconv.Itoa(ports.Components[controlplane.Scheduler])},
	}
	for _, comp := range []controlplane.Component{controlplane.APIServer, controlplane.ControllerManager, controlplane.Scheduler} {
		if got := flagValue(args[comp], want[comp][0]); got != want[comp][1] {
			return fmt.Errorf("the rendered %s has --%s=%s, the local provider serves it on %s: render the control plane with the provider's Facts as the control-plane plugin's machine value", comp, want[comp][0], got, want[comp][1])
		}
	}
	etcd := factsOf(ports)["etcdServers"].(string)
	if got := flagValue(args[controlplane.Etcd], "listen-client-urls"); got != etcd {
		return fmt.Errorf("the rendered %s has --listen-client-urls=%s, the local provider looks for it at %s: render the control plane with the provider's Facts as the control-plane plugin's machine value", controlplane.Etcd, got, etcd)
	}
	if got := flagValue(args[controlplane.APIServer], "etcd-servers"); got != etcd {
		return fmt.Errorf("the rendered %s has --etcd-servers=%s, the local provider runs etcd at %s: render the control plane with the provider's Facts as the control-plane plugin's machine value", controlplane.APIServer, got, etcd)
	}
	return nil
}

// keepEtcdData points the data directory the rendered etcd names (dir, under
// the control-plane machine's root) at legacy, where local clusters kept etcd's
// data before its flags came from the control-plane plugin, so that such a
// cluster keeps its objects. Nothing happens when there is no legacy data or dir
// already holds some.
func keepEtcdData(legacy, dir string) error {
	if dir == "" {
		return nil
	}
	if fi, err := os.Stat(legacy); err != nil || !fi.IsDir() {
		return nil //nolint:nilerr // no legacy data: nothing to keep
	}
	if fi, err := os.Lstat(dir); err == nil {
		if !fi.IsDir() {
			return nil // already the link (or something the user made)
		}
		if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
			return nil //nolint:nilerr // data of its own: keep it
		}
		if err := os.Remove(dir); err != nil {
			return fmt.Errorf("keep etcd's data: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("keep etcd's data: %w", err)
	}
	if err := os.Symlink(legacy, dir); err != nil {
		return fmt.Errorf("keep etcd's data in %s: %w", legacy, err)
	}
	return nil
}

// controlPlane attaches to the running control plane and gives it the command
// lines args, or starts it with them.
func (p *Provider) controlPlane(ctx context.Context, args map[controlplane.Component][]string, cl *provider.Running) error {
	opts := p.cpOptions()
	cp, err := controlplane.Attach(ctx, opts)
	switch {
	case err == nil:
		p.cp = cp
		if want := p.opts.APIServerPort; want != 0 && portOf(cp.Host()) != want {
			return fmt.Errorf("cluster %s runs its API server on port %d, cluster.yaml asks for %d: run `kubeplug down` first to move it",
				p.opts.ClusterName, portOf(cp.Host()), want)
		}
		if p.upgradeFrom != "" {
			// One component at a time, in controlplane.UpgradeOrder, each on
			// the new binaries with the new version's flags.
			err := cp.Upgrade(ctx, p.binDir, controlplane.Flags{Args: args}, func(c controlplane.Component) {
				cl.Restarted = append(cl.Restarted, string(c))
				p.event("upgrade", "", "upgrading "+string(c)+" to Kubernetes "+p.binVersion)
			})
			if err != nil {
				return fmt.Errorf("upgrade the control plane of cluster %s to Kubernetes %s: %w", p.opts.ClusterName, p.binVersion, err)
			}
			return nil
		}
		restarted, err := cp.Reconfigure(ctx, controlplane.Flags{Args: args})
		for _, c := range restarted {
			cl.Restarted = append(cl.Restarted, string(c))
			p.event("control-plane", "", "restarted "+string(c)+" with new flags")
		}
		return err
	case errors.Is(err, controlplane.ErrIncompatibleState):
		return incompatible(p.opts.StateDir, err)
	case errors.Is(err, controlplane.ErrDegraded):
		p.event("control-plane", "", "control plane partly running; restarting it: "+err.Error())
		if err := controlplane.StopDetached(ctx, opts); err != nil && !errors.Is(err, controlplane.ErrNotRunning) {
			return fmt.Errorf("stop the partly running control plane: %w", err)
		}
	case !errors.Is(err, controlplane.ErrNotRunning):
		return err
	}
	opts.Args = args
	opts.Ports = p.ports
	// The API server's certificate names the "kubernetes" Service's address,
	// and kwok's Pod IPs lie in the cluster CIDR: both as the static Pods say.
	opts.ServiceClusterIPRange = flagValue(args[controlplane.APIServer], "service-cluster-ip-range")
	opts.PodCIDR = flagValue(args[controlplane.ControllerManager], "cluster-cidr")
	p.event("control-plane", "", "starting the control plane")
	began := time.Now()
	cp, err = controlplane.Start(ctx, opts)
	if err != nil {
		return incompatible(p.opts.StateDir, fmt.Errorf("start the control plane: %w", err))
	}
	p.cp = cp
	cl.Started = true
	p.event("control-plane", "", fmt.Sprintf("control plane ready at %s in %s", cp.Host(), time.Since(began).Round(time.Millisecond)))
	return nil
}

func portOf(host string) int {
	for i := len(host) - 1; i >= 0; i-- {
		if host[i] == ':' {
			n, _ := strconv.Atoi(host[i+1:])
			return n
		}
	}
	return 0
}

// desiredNodes lists the control-plane node first, then every pool's nodes in
// pool and index order.
func (p *Provider) desiredNodes(d *provider.Desired) []*desiredNode {
	node := func(name string, pool *model.Pool) *desiredNode {
		labels := map[string]string{}
		for k, s := range pool.Kubelet.Labels {
			labels[k] = s.Value
		}
		labels[PoolLabel] = pool.Name
		if pool.Role == model.RoleControlPlane {
			labels[ControlPlaneRoleLabel] = ""
		}
		return &desiredNode{name: name, pool: pool.Name, role: pool.Role, labels: labels, machine: d.Machines[pool.Name], spec: pool, keyPairs: keyPairsOf(d.Model, pool.Name)}
	}
	cpPool := d.Model.Pools[model.ControlPlanePool]
	if cpPool == nil {
		cpPool = &model.Pool{Name: model.ControlPlanePool, Role: model.RoleControlPlane, Count: 1}
	}
	// More than one only on machines (checkControlPlaneCount).
	var out []*desiredNode
	for i := range max(cpPool.Count, 1) {
		out = append(out, node(cpName(i), cpPool))
	}
	for _, name := range d.Model.PoolNames() {
		pool := d.Model.Pools[name]
		if name == model.ControlPlanePool {
			continue
		}
		for i := range pool.Count {
			out = append(out, node(name+"-"+strconv.Itoa(i), pool))
		}
	}
	return out
}

// upNode brings one node to its pool's state: machine files, beforeNodeup,
// join and Ready, afterNodeup. The control-plane node ran beforeNodeup before
// the control plane started; a worker whose files and beforeNodeup ran while
// it started (early, see startEarlyHooks) takes their outcome.
func (p *Provider) upNode(ctx context.Context, n *desiredNode, status *provider.NodeStatus, isControlPlane bool, early *earlyPhase) error {
	if !isControlPlane {
		var sum provider.HookSummary
		var err error
		if early != nil {
			sum, err = early.outcome(ctx, n.name)
		} else {
			sum, err = p.beforeNodeup(ctx, n)
		}
		status.Hooks[hookspec.PhaseBeforeNodeup] = sum
		if err != nil {
			// The node does not join; a Node from an earlier Up stays, so a
			// hook that broke on an update does not take running Pods away.
			return err
		}
	}
	taints := nodeTaints(n.spec)
	if isControlPlane {
		taints = append(taints, corev1.Taint{Key: ControlPlaneRoleLabel, Effect: corev1.TaintEffectNoSchedule})
	}
	var created bool
	var err error
	if n.real != nil {
		// A real node's kubelet takes seconds to join: say so while it does.
		p.nodeEvent(n.name, n.name, "node "+n.name+" joining", false)
		created, err = p.joinReal(ctx, n.real, controlplane.NodeOptions{Labels: n.labels, Taints: taints})
	} else {
		created, err = p.cp.EnsureNode(ctx, n.name, controlplane.NodeOptions{Labels: n.labels, Taints: taints, KubeletVersion: p.kubeletVersion()})
	}
	if err != nil {
		return fmt.Errorf("node %s: join: %w", n.name, err)
	}
	if err := p.cp.WaitNodeReady(ctx, n.name); err != nil {
		return fmt.Errorf("node %s: wait for Ready: %w", n.name, err)
	}
	status.Ready = true
	switch {
	case created:
		p.nodeEvent(n.name, n.name, "node "+n.name+" Ready", true)
	case n.real != nil:
		p.nodeEvent(n.name, n.name, "", true) // joined before: nothing to say
	}
	sum, err := p.runPhase(ctx, n, hookspec.PhaseAfterNodeup)
	status.Hooks[hookspec.PhaseAfterNodeup] = sum
	return err
}

// upMachineNode brings a machine-pool node up: the machine boots its pool's
// rendered files (its hooks run inside it), its kubelet joins, then the pool's
// labels and taints are set on the Node as for every node, and it must be
// Ready.
func (p *Provider) upMachineNode(ctx context.Context, n *desiredNode, rc *realCluster, token string, status *provider.NodeStatus) error {
	if p.replacing(n) {
		// One machine at a time is replaced, each until it is Ready again,
		// so the workloads of the others keep running; after a replacement
		// fails, the roll stops there.
		p.rollMu.Lock()
		defer p.rollMu.Unlock()
		if p.rollFailed != "" {
			return fmt.Errorf("machine %s: not replaced, since the replacement of %s failed (the roll stops at the first failure)", n.name, p.rollFailed)
		}
		err := p.upMachineReady(ctx, n, rc, token, status)
		if err != nil {
			p.rollFailed = n.name
		}
		return err
	}
	return p.upMachineReady(ctx, n, rc, token, status)
}

// upMachineReady is upMachineNode's work, under the roll lock for a
// replacement.
func (p *Provider) upMachineReady(ctx context.Context, n *desiredNode, rc *realCluster, token string, status *provider.NodeStatus) error {
	created, err := p.upMachine(ctx, n, rc, token, status)
	if err != nil {
		return err
	}
	taints := nodeTaints(n.spec)
	if n.role == model.RoleControlPlane {
		taints = append(taints, corev1.Taint{Key: ControlPlaneRoleLabel, Effect: corev1.TaintEffectNoSchedule})
	}
	if _, err := p.cp.EnsureNode(ctx, n.name, controlplane.NodeOptions{Labels: n.labels, Taints: taints}); err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	if err := p.cp.WaitNodeReady(ctx, n.name); err != nil {
		return fmt.Errorf("node %s: wait for Ready: %w (kubelet's journal:\n%s)", n.name, err, n.sys.Journal(ctx, "kubelet.service", 15))
	}
	if n.role == model.RoleControlPlane && n.machine != nil {
		client, err := kubernetes.NewForConfig(p.cp.RESTConfig())
		if err != nil {
			return err
		}
		if err := waitStaticPods(ctx, client, n.name, n.machine, 3*time.Minute); err != nil {
			return err
		}
	}
	status.Ready = true
	if created {
		p.nodeEvent(n.name, n.name, "machine "+n.name+" Ready", true)
	} else {
		p.nodeEvent(n.name, n.name, "", true)
	}
	sum, err := p.machinePhase(ctx, n, hookspec.PhaseAfterNodeup, "")
	status.Hooks[hookspec.PhaseAfterNodeup] = sum
	return err
}

// hasMachines says whether a node of a machine pool is wanted.
func (p *Provider) hasMachines(nodes []*desiredNode) bool {
	return slices.ContainsFunc(nodes, func(n *desiredNode) bool { return p.machinePool(n.pool) })
}

func nodeTaints(pool *model.Pool) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range pool.Kubelet.Taints {
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return out
}

// removeStale deletes the Nodes of pools that shrank or vanished, and every
// machine directory without a desired node.
func (p *Provider) removeStale(ctx context.Context, nodes []*desiredNode) error {
	want := map[string]bool{}
	for _, n := range nodes {
		want[n.name] = true
	}
	client, err := kubernetes.NewForConfig(p.cp.RESTConfig())
	if err != nil {
		return fmt.Errorf("build client: %w", err)
	}
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: PoolLabel})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range list.Items {
		if want[n.Name] {
			continue
		}
		if err := p.cp.DeleteNode(ctx, n.Name); err != nil {
			return err
		}
		p.event("node", n.Name, "node "+n.Name+" removed (pool "+n.Labels[PoolLabel]+")")
	}
	if p.haCount > 1 {
		want[haLBName] = true
	}
	entries, err := os.ReadDir(filepath.Join(p.opts.StateDir, machinesDir))
	if err != nil {
		return fmt.Errorf("list machines: %w", err)
	}
	for _, e := range entries {
		if !want[e.Name()] {
			if err := os.RemoveAll(p.machineDir(e.Name())); err != nil {
				return fmt.Errorf("remove machine directory of node %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

// AfterDeploy implements provider.Provider: every node recorded by the last Up
// runs its afterDeploy phase.
func (p *Provider) AfterDeploy(ctx context.Context) error {
	st, err := readState(p.opts.StateDir)
	if err == nil && st != nil {
		unlock, lerr := p.lock(ctx)
		if lerr != nil {
			return lerr
		}
		defer unlock()
	}
	if err != nil {
		return err
	}
	if st == nil || len(st.Nodes) == 0 {
		return fmt.Errorf("after deploy: cluster %s has no nodes in %s: %w", p.opts.ClusterName, p.opts.StateDir, provider.ErrNotRunning)
	}
	var errs []error
	for _, ns := range st.Nodes {
		if !ns.Joined {
			continue
		}
		n := &desiredNode{name: ns.Name, pool: ns.Pool, role: ns.Role}
		if ns.Machine && st.Network != nil {
			n.sys = p.recordedMachine(ns, *st.Network)
			if _, err := p.machinePhase(ctx, n, hookspec.PhaseAfterDeploy, "kubeplug-after-deploy.service"); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if _, err := p.runPhase(ctx, n, hookspec.PhaseAfterDeploy); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Down implements provider.Provider: under the cluster's lock, the real nodes
// first (nothing of theirs may outlive the cluster), then the control plane,
// then the state directory when purge is set; downResult says what that was.
func (p *Provider) Down(ctx context.Context, purge bool) error {
	dir := p.opts.StateDir
	if isStateDir(dir) {
		unlock, err := p.lock(ctx)
		if err != nil {
			return err
		}
		defer unlock()
	}
	st, stateErr := readState(dir)
	machineCP := stateErr == nil && st.controlPlaneMachine()
	if stateErr == nil {
		if err := p.stopRealNodes(ctx, st); err != nil {
			return err
		}
	}
	running, runErr := controlplane.Running(filepath.Join(dir, controlPlaneDir))
	if stateErr == nil && runErr == nil && running {
		if err := p.stopControlPlane(ctx); err != nil {
			return err
		}
	}
	if purge {
		if err := p.purge(); err != nil {
			return err
		}
	}
	return p.downResult(stateErr, runErr, running || machineCP, purge)
}

// stopRealNodes stops the cluster's real nodes and machines and records that
// none is joined and the node network is gone. While the API server still
// runs, their kubelets do not matter.
func (p *Provider) stopRealNodes(ctx context.Context, st *state) error {
	if err := p.teardownReal(ctx, st); err != nil {
		return fmt.Errorf("stop real nodes of cluster %s: %w", p.opts.ClusterName, err)
	}
	if st == nil || st.Network == nil {
		return nil
	}
	st.Network = nil
	for i := range st.Nodes {
		st.Nodes[i].Joined = false
	}
	return writeState(p.opts.StateDir, st)
}

// stopControlPlane stops the detached control plane of this machine.
func (p *Provider) stopControlPlane(ctx context.Context) error {
	p.event("control-plane", "", "stopping the control plane")
	if err := controlplane.StopDetached(ctx, p.cpOptions()); err != nil && !errors.Is(err, controlplane.ErrNotRunning) {
		return fmt.Errorf("stop cluster %s: %w", p.opts.ClusterName, err)
	}
	p.cp = nil
	return nil
}

// downResult is what Down reports once it stopped what it could: a state
// directory this version cannot read is an error unless purged (then an
// event), and a cluster with nothing that ran is provider.ErrNotRunning.
func (p *Provider) downResult(stateErr, runErr error, ran, purge bool) error {
	dir := p.opts.StateDir
	switch {
	case stateErr != nil && !purge:
		return stateErr
	case runErr != nil && !purge:
		return incompatible(dir, runErr)
	case stateErr != nil || runErr != nil:
		p.event("state", "", "removed state directory "+dir+" written by an incompatible kubeplug; processes it may have started are not known to this version")
		return nil
	case !ran:
		return fmt.Errorf("cluster %s (state directory %s): %w", p.opts.ClusterName, dir, provider.ErrNotRunning)
	}
	return nil
}

// purge removes the state dir, but only one that is kubeplug's: it holds
// StateFile or the control plane's data, or does not exist.
func (p *Provider) purge() error {
	dir := p.opts.StateDir
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("purge %s: %w", dir, err)
	}
	ours := len(entries) == 0 || isStateDir(dir)
	if !ours {
		return fmt.Errorf("purge %s: not a kubeplug state directory (no %s), left alone", dir, StateFile)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("purge %s: %w", dir, err)
	}
	p.event("state", "", "removed state directory "+dir)
	return nil
}

// isStateDir says whether dir holds a cluster's state: StateFile or the
// control plane's data.
func isStateDir(dir string) bool {
	for _, name := range []string{StateFile, controlPlaneDir} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}
