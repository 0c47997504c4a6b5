package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
)

// Up is a list of named steps (upSteps) over one upRun, as `kubeplug up` is a
// pipeline of steps over one run: each step reads what the steps before it set
// and sets its own part. The table is also the provider's creation steps as
// data (Steps), which an expansion's skipSteps names as provider/NAME.

// upRun is one Up: what its steps share.
type upRun struct {
	p *Provider
	d *provider.Desired
	// unlock frees the state directory's lock (state); cleanup removes what
	// the run made for itself.
	unlock  func()
	cleanup []func()

	// Set by state.
	st        *state
	prev      []nodeState // the nodes of the last Up
	restore   *SnapshotHeader
	restoreDB string
	upgrade   bool

	// Set by layout.
	nodes     []*desiredNode
	cpNode    *desiredNode
	args      map[controlplane.Component][]string
	statuses  map[string]*provider.NodeStatus
	realNames []string
	indexes   map[string]int
	cps       []*desiredNode

	// Set by control-plane: the Running Up returns (nil before, so that a
	// failure before the control plane runs returns none).
	cl *provider.Running
	// Set by control-plane (a control plane on a machine) or machines.
	rc    *realCluster
	token string

	// early are the simulated workers' files and beforeNodeup phases that
	// run while a new cluster's control plane starts (startEarlyHooks), by
	// node name; nil otherwise.
	early map[string]*earlyPhase

	// errs are the nodes' failures: the steps after node-join still run,
	// and Up returns them joined.
	errs []error
}

// upStep is one creation step of Up.
type upStep struct {
	provider.CreationStep
	do func(*upRun, context.Context) error
}

// upSteps are Up's steps in order: the one place that knows them.
var upSteps = []upStep{
	{provider.CreationStep{Name: "preflight", Means: "the Kubernetes version's binaries, the control-plane count, what real nodes and machines need of this machine, the on-demand images, the state directory's owner"}, (*upRun).preflight},
	{provider.CreationStep{Name: "state", Means: "the state directory's lock and state: its cluster, the version change (upgrade), a restore's snapshot checked"}, (*upRun).loadState},
	{provider.CreationStep{Name: "layout", Means: "the nodes wanted, the control-plane machine's files, the static Pods' flags checked against the provider's facts"}, (*upRun).layout},
	{provider.CreationStep{Name: "etcd-restore", Means: "etcd's data restored from --restore-from's snapshot (only then)"}, (*upRun).etcdRestore},
	{provider.CreationStep{Name: "control-plane", Means: "the control-plane node's beforeNodeup hooks, then the components: etcd and kube-apiserver started together, kube-scheduler and kwok once the API server serves, kube-controller-manager once it is ready, each waited for until ready (or the control-plane machines booted)"}, (*upRun).controlPlane},
	{provider.CreationStep{Name: "stale-nodes", Means: "the nodes recorded, then those no longer wanted stopped and their Nodes deleted"}, (*upRun).staleNodes},
	{provider.CreationStep{Name: "machines", Means: "the real nodes' network and registry, each machine created from its pool's user data, a bootstrap token for those that boot"}, (*upRun).machines},
	{provider.CreationStep{Name: "node-join", Means: "every node at once: its files, beforeNodeup hooks, join, Ready, afterNodeup hooks"}, (*upRun).nodeJoin},
	{provider.CreationStep{Name: "node-routes", Skippable: true, Means: "routes between the real nodes' Pod subnets on this machine; a site whose network routes them itself skips it"}, (*upRun).nodeRoutes},
	{provider.CreationStep{Name: "record", Means: "each node's state and the cluster's version written to the state directory"}, (*upRun).record},
}

// ConditionDNSReady is the local provider's condition that the cluster's DNS
// answers: a ready endpoint behind the kube-dns Service.
const ConditionDNSReady = "dns-ready"

// Steps returns the local provider's creation steps and readiness
// conditions (registered with provider.RegisterSteps).
func Steps() provider.Steps {
	s := provider.Steps{}
	for _, u := range upSteps {
		s.Steps = append(s.Steps, u.CreationStep)
	}
	s.Conditions = []provider.Condition{{
		Name:  ConditionDNSReady,
		Means: "the cluster's DNS answers: the kube-dns Service of kube-system has a ready endpoint",
		Check: v1alpha1.Check{Name: ConditionDNSReady, Expression: &v1alpha1.ExpressionCheck{
			ObjectRef:  v1alpha1.ObjectRef{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice", Namespace: "kube-system"},
			Expression: `objects.exists(o, has(o.metadata.labels) && "kubernetes.io/service-name" in o.metadata.labels && o.metadata.labels["kubernetes.io/service-name"] == "kube-dns" && has(o.endpoints) && o.endpoints.exists(e, has(e.conditions) && has(e.conditions.ready) && e.conditions.ready))`,
			Message:    "no ready endpoint behind Service kube-system/kube-dns: the cluster's DNS does not answer",
			Timeout:    "3m",
		}},
		Applies: hasDNSService,
	}}
	return s
}

// hasDNSService says whether the model holds the Service kube-system/kube-dns.
func hasDNSService(m *model.Model) bool {
	return m != nil && slices.ContainsFunc(m.Kubernetes.Objects, func(o model.Object) bool {
		md, _ := o.Object["metadata"].(map[string]any)
		return o.Object["kind"] == "Service" && md["namespace"] == "kube-system" && md["name"] == "kube-dns"
	})
}

// checkSkips refuses a skip of a step that is not Skippable, or unknown.
func checkSkips(skip map[string]string) error {
	s := Steps()
	for _, name := range slices.Sorted(maps.Keys(skip)) {
		st, ok := s.Step(name)
		switch {
		case !ok:
			return fmt.Errorf("local provider: expansion %s skips step %s, which the local provider does not have (its steps: %s)", skip[name], name, strings.Join(s.StepNames(), ", "))
		case !st.Skippable:
			return fmt.Errorf("local provider: expansion %s skips step %s, which the cluster cannot do without (steps a site may skip: %s)", skip[name], name, strings.Join(s.SkippableNames(), ", "))
		}
	}
	return nil
}

// Up implements provider.Provider; see the package doc for what it does on
// this machine. A d.KubernetesVersion the provider cannot run is refused
// before anything is written or started (CheckKubernetesVersion). It runs
// upSteps in order, leaving out those d.Skip names (each said in an event).
func (p *Provider) Up(ctx context.Context, d *provider.Desired) (*provider.Running, error) {
	if d == nil || d.Model == nil {
		return nil, errors.New("local provider: up: no model")
	}
	if err := checkSkips(d.Skip); err != nil {
		return nil, err
	}
	u := &upRun{p: p, d: d}
	defer u.release()
	for _, s := range upSteps {
		if by, ok := d.Skip[s.Name]; ok {
			p.event(s.Name, "", fmt.Sprintf("step %s skipped: expansion %s says the site provides it", s.Name, by))
			continue
		}
		if err := s.do(u, ctx); err != nil {
			return u.cl, err
		}
	}
	return u.cl, errors.Join(u.errs...)
}

// release frees what the run holds, in reverse order.
func (u *upRun) release() {
	for _, f := range slices.Backward(u.cleanup) {
		f()
	}
	if u.unlock != nil {
		u.unlock()
	}
}

// preflight refuses, before anything is written or started, what this
// machine cannot run.
func (u *upRun) preflight(ctx context.Context) error {
	p, d := u.p, u.d
	// A cluster created with another version is refused before any binary is
	// looked for (and again under the lock below).
	if st, err := readState(p.opts.StateDir); err == nil && st != nil {
		if _, err := checkVersionChange(p.opts.ClusterName, st.KubernetesVersion, d.KubernetesVersion); err != nil {
			return err
		}
	}
	if err := p.checkKubernetesVersion(ctx, d.KubernetesVersion); err != nil {
		return err
	}
	if err := p.checkControlPlaneCount(d.Model); err != nil {
		return err
	}
	// A machine that cannot host the real pools is refused before anything starts.
	if err := p.preflightReal(d.Model); err != nil {
		return err
	}
	// So are plugins' key pairs for nodes that are not machines.
	if err := p.checkKeyPairs(d.Model); err != nil {
		return err
	}
	// So is an on-demand image (kubeplug's own, for the kubeplug-controller
	// plugin) that is not at hand, or that no real node would run.
	if err := p.preflightOnDemand(d.Model); err != nil {
		return err
	}
	if entries, err := os.ReadDir(p.opts.StateDir); err == nil && slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() != lockFile }) && !isStateDir(p.opts.StateDir) {
		return fmt.Errorf("state directory %s is not empty and holds no %s: not a kubeplug state directory, left alone; choose another --state-dir", p.opts.StateDir, StateFile)
	}
	return nil
}

// loadState takes the state directory's lock for the rest of Up and reads
// and updates its state.
func (u *upRun) loadState(ctx context.Context) error {
	p, d := u.p, u.d
	unlock, err := p.lock(ctx)
	if err != nil {
		return err
	}
	u.unlock = unlock
	st, err := readState(p.opts.StateDir)
	if err != nil {
		return err
	}
	if st != nil && st.ClusterName != "" && st.ClusterName != p.opts.ClusterName {
		return fmt.Errorf("state directory %s belongs to cluster %q, not %q; use another --state-dir", p.opts.StateDir, st.ClusterName, p.opts.ClusterName)
	}
	if err := os.MkdirAll(filepath.Join(p.opts.StateDir, machinesDir), 0o755); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	u.restoreDB = filepath.Join(p.opts.StateDir, "etcd-restore.db")
	if p.opts.RestoreFrom != "" {
		// Refused before anything is written: a snapshot that is not whole,
		// of another cluster, or onto a cluster that exists.
		u.cleanup = append(u.cleanup, func() { _ = os.Remove(u.restoreDB) })
		if u.restore, err = p.restoreCheck(ctx, st, d.KubernetesVersion, u.restoreDB); err != nil {
			return err
		}
	}
	if st == nil {
		st = &state{}
	}
	upgrade, err := checkVersionChange(p.opts.ClusterName, st.KubernetesVersion, d.KubernetesVersion)
	if err != nil {
		return err
	}
	u.upgrade = upgrade
	p.upgradeFrom = ""
	if upgrade {
		// The recorded version moves only once everything runs the new one,
		// so an interrupted upgrade is finished by the next Up.
		p.upgradeFrom = st.KubernetesVersion
		p.event("upgrade", "", fmt.Sprintf("upgrading cluster %s from Kubernetes %s to %s", p.opts.ClusterName, st.KubernetesVersion, p.binVersion))
	} else {
		st.KubernetesVersion = strings.TrimPrefix(d.KubernetesVersion, "v")
	}
	u.prev = slices.Clone(st.Nodes)
	st.ClusterName = p.opts.ClusterName
	u.st = st
	return writeState(p.opts.StateDir, st)
}

// layout decides the nodes, writes the control-plane machine's files and
// checks the static Pods' flags against the provider's facts.
func (u *upRun) layout(_ context.Context) error {
	p := u.p
	u.nodes = p.desiredNodes(u.d)
	u.cpNode = u.nodes[0]
	p.rollFailed = ""
	if err := p.checkControlPlaneMode(u.st); err != nil {
		return err
	}
	// The control-plane machine first: the flags may name its files.
	if err := p.writeMachine(u.cpNode.name, u.cpNode.machine); err != nil {
		return err
	}
	args, err := staticPodArgs(u.cpNode.machine, p.machineRoot(u.cpNode.name))
	if err != nil {
		return err
	}
	u.args = args
	if err := u.checkArgs(); err != nil { //nolint:contextcheck // provider.FactSource's Facts, which it calls, takes no context
		return err
	}
	u.statuses = map[string]*provider.NodeStatus{}
	for _, n := range u.nodes {
		u.statuses[n.name] = &provider.NodeStatus{Name: n.name, Pool: n.pool, Role: n.role, Hooks: map[string]provider.HookSummary{}}
	}
	for _, n := range u.nodes {
		if p.realPool(n.pool) {
			u.realNames = append(u.realNames, n.name)
		}
	}
	u.indexes = realIndexes(u.prev, u.realNames)
	for _, n := range u.nodes {
		if n.role != model.RoleControlPlane {
			continue
		}
		if i, ok := u.indexes[n.name]; ok && i != len(u.cps) {
			return fmt.Errorf("machine %s: has node address %d in the state, the control-plane machine's must be %d: run `kubeplug down` first", n.name, i, len(u.cps))
		}
		u.cps = append(u.cps, n)
	}
	return nil
}

// checkArgs checks the static Pods' flags against the provider's facts (a
// control plane on a machine: its address; else the ports), completing
// them with what machines need to join.
func (u *upRun) checkArgs() error {
	p, args := u.p, u.args
	if p.cpMachine() {
		if u.upgrade && p.haCount < 2 {
			// Its one machine holds etcd's data: replacing it is no upgrade.
			// Three are replaced one at a time (cpupgrade.go).
			return fmt.Errorf("cluster %s runs its control plane on one machine: upgrading it from Kubernetes %s in place is not built (its machine holds etcd's data); take a snapshot (`kubeplug etcd snapshot`), `kubeplug down --purge` and `kubeplug up --restore-from` on the new version, or run three control-plane machines (spec.controlPlane.count: 3), which are upgraded one at a time", p.opts.ClusterName, p.upgradeFrom)
		}
		if p.cpNet == nil {
			if _, err := p.Facts(); err != nil {
				return err
			}
		}
		return checkMachineFacts(args, p.cpNet.NodeIP(cpMachineIndex).String())
	}
	if p.hasMachines(u.nodes) && flagValue(args[controlplane.APIServer], "enable-bootstrap-token-auth") == "" {
		// Machines join with a bootstrap token, as kubeadm's nodes do.
		args[controlplane.APIServer] = append(args[controlplane.APIServer], "--enable-bootstrap-token-auth=true")
	}
	if p.ports == nil {
		if _, err := p.Facts(); err != nil {
			return err
		}
	}
	if err := checkFacts(args, *p.ports); err != nil {
		return err
	}
	return keepEtcdData(filepath.Join(p.opts.StateDir, controlPlaneDir, "etcd"), flagValue(args[controlplane.Etcd], "data-dir"))
}

// etcdRestore restores etcd's data from the snapshot, with --restore-from.
func (u *upRun) etcdRestore(ctx context.Context) error {
	p := u.p
	if u.restore == nil {
		return nil
	}
	return p.restoreControlPlane(ctx, u.restore, u.restoreDB, u.args[controlplane.Etcd])
}

// desiredState is the state's record of the nodes wanted.
func (u *upRun) desiredState() []nodeState {
	var out []nodeState
	for _, n := range u.nodes {
		idx, real := u.indexes[n.name]
		out = append(out, nodeState{Name: n.name, Pool: n.pool, Role: n.role, Real: real, RealIndex: idx, Machine: real && u.p.machinePool(n.pool)})
	}
	return out
}

// controlPlane starts the control plane (or boots its machines) and waits
// until it answers.
func (u *upRun) controlPlane(ctx context.Context) error {
	p, st := u.p, u.st
	cl := &provider.Running{Kubeconfig: Kubeconfig(p.opts.StateDir)}
	if p.cpMachine() {
		// Its hooks run inside it, as every machine's. A new cluster's
		// worker machines boot while it does (their token made valid once
		// its API server answers).
		var early []*desiredNode
		if len(u.prev) == 0 {
			st.Nodes = u.desiredState()
			for _, n := range u.nodes[len(u.cps):] {
				if _, ok := u.indexes[n.name]; ok && p.machinePool(n.pool) {
					early = append(early, n)
				}
			}
		}
		rc, err := p.upControlPlaneMachine(ctx, u.d, st, u.cps, u.args, cl, early, u.indexes)
		if err != nil {
			return err
		}
		u.rc = rc
	} else {
		if err := u.startEarlyHooks(ctx); err != nil {
			return err
		}
		sum, err := p.runPhase(ctx, u.cpNode, hookspec.PhaseBeforeNodeup)
		u.statuses[u.cpNode.name].Hooks[hookspec.PhaseBeforeNodeup] = sum
		if err != nil {
			return err
		}
		if err := p.controlPlane(ctx, u.args, cl); err != nil {
			return err
		}
	}
	cl.RESTConfig = p.cp.RESTConfig()
	u.cl = cl
	return nil
}

// staleNodes records the nodes before touching them, so that an interrupted
// Up leaves a state dir that names every machine directory it may have
// created, then stops the real nodes no longer wanted (or now simulated) and
// deletes their Nodes.
func (u *upRun) staleNodes(ctx context.Context) error {
	p, st := u.p, u.st
	st.Nodes = u.desiredState()
	keep := map[string]bool{}
	for _, name := range u.realNames {
		keep[name] = true
	}
	if err := p.stopReal(ctx, &state{Network: st.Network, Nodes: u.prev}, keep); err != nil {
		return err
	}
	for _, ns := range u.prev {
		if ns.Real && !keep[ns.Name] {
			if err := p.cp.DeleteNode(ctx, ns.Name); err != nil {
				return err
			}
		}
	}
	if err := writeState(p.opts.StateDir, st); err != nil {
		return err
	}
	return p.removeStale(ctx, u.nodes)
}

// machines brings the real nodes' network and registry and creates each
// real node and machine (booting none yet); without real nodes, removes
// what the last one left.
func (u *upRun) machines(ctx context.Context) error {
	p, st := u.p, u.st
	if len(u.realNames) == 0 {
		if st.Network == nil {
			return nil
		}
		// The last real pool went: the registry and network go too.
		if err := p.teardownReal(ctx, st); err != nil {
			return err
		}
		st.Network = nil
		return writeState(p.opts.StateDir, st)
	}
	if u.rc == nil {
		rc, err := p.ensureRealCluster(ctx, st, u.args)
		if err != nil {
			return err
		}
		u.rc = rc
	}
	booting := false
	for _, n := range u.nodes {
		idx, ok := u.indexes[n.name]
		if !ok || n.sys != nil { // booted with the control-plane machine
			continue
		}
		if !p.machinePool(n.pool) {
			n.real = p.realNode(u.rc, n, idx)
			continue
		}
		ud, err := userData(u.d, n.pool)
		if err != nil {
			return err
		}
		if n.sys, err = p.machineFor(u.rc, n, idx, ud); err != nil {
			return err
		}
		n.real = n.sys.Node
		// A machine that boots (new, stopped, or replacing an older
		// instance) needs a bootstrap token.
		booting = booting || !n.sys.Running(ctx) || p.replacing(n)
	}
	if !booting {
		return nil
	}
	token, err := p.ensureBootstrap(ctx)
	u.token = token
	return err
}

// nodeJoin brings every node up at once, at most Options.Parallel at a time;
// a node's failure does not stop the others (u.errs).
func (u *upRun) nodeJoin(ctx context.Context) error {
	p := u.p
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		sem = make(chan struct{}, p.opts.Parallel)
	)
	for _, n := range u.nodes {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				mu.Lock()
				u.errs = append(u.errs, fmt.Errorf("node %s: %w", n.name, ctx.Err()))
				mu.Unlock()
				return
			}
			status := u.statuses[n.name]
			var err error
			if n.sys != nil {
				err = p.upMachineNode(ctx, n, u.rc, u.token, status)
			} else {
				err = p.upNode(ctx, n, status, n.name == u.cpNode.name, u.early[n.name])
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				u.errs = append(u.errs, err)
			}
		})
	}
	wg.Wait()
	return nil
}

// nodeRoutes routes each real node's Pod subnet to it from the others. A
// machine's network is its own (systemd-networkd); its Pods are reached
// through the host, which routes their subnet to it.
func (u *upRun) nodeRoutes(ctx context.Context) error {
	var reals []*realnode.Node
	for _, n := range u.nodes {
		if n.real != nil && n.sys == nil {
			reals = append(reals, n.real)
		}
	}
	for _, n := range reals {
		if err := n.RoutePeers(ctx, reals); err != nil {
			u.errs = append(u.errs, err)
		}
	}
	return nil
}

// record writes each node's state and, once an upgrade went through
// everywhere, the cluster's new version; the nodes' failures are sorted.
func (u *upRun) record(_ context.Context) error {
	p, st := u.p, u.st
	for _, name := range slices.Sorted(maps.Keys(u.statuses)) {
		u.cl.Nodes = append(u.cl.Nodes, *u.statuses[name])
	}
	for i := range st.Nodes {
		st.Nodes[i].Joined = u.statuses[st.Nodes[i].Name].Ready
	}
	if u.upgrade && len(u.errs) == 0 {
		st.KubernetesVersion = p.binVersion
		p.event("upgrade", "", fmt.Sprintf("cluster %s upgraded to Kubernetes %s", p.opts.ClusterName, p.binVersion))
	}
	if err := writeState(p.opts.StateDir, st); err != nil {
		u.errs = append(u.errs, err)
	}
	slices.SortFunc(u.errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return nil
}
