package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/bootstraptoken"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/clusterpki"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
	"github.com/kubeplug/kubeplug/pkg/provider/nodeimage"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// The control plane on a machine: when spec.provider.local.machinePools names
// the control-plane pool, the control plane is not a set of processes on this
// host but the static Pods `render` writes into that pool's cloud-init file,
// run by the kubelet of a systemd machine booted from that file, from images
// of the cluster's own Kubernetes programs pushed to the cluster's registry.
// The provider gives the machine what a cloud's bootstrap gives a kubeadm
// control-plane node (its vendor data): the PKI, the components' kubeconfig and
// the kubelet's own client certificate.

// cpMachineIndex is the control-plane machine's ordinal in the node network:
// its address is the first node address, known before anything starts, so
// that Facts can render the static Pods with it.
const cpMachineIndex = 0

// The components' ports on the control-plane machine: its network is its own,
// so they are kubeadm's.
const (
	machineAPIServerPort         = 6443
	machineControllerManagerPort = 10257
	machineSchedulerPort         = 10259
	machineEtcdClientPort        = 2379
	machineEtcdPeerPort          = 2380
)

// cpMachine says whether the control plane runs on a machine.
func (p *Provider) cpMachine() bool { return p.machinePool(model.ControlPlanePool) }

// machineFacts are the facts of a control-plane machine at address ip.
func machineFacts(ip string) map[string]any {
	return map[string]any{
		"address": ip,
		"ports": map[string]any{
			"apiServer":         machineAPIServerPort,
			"controllerManager": machineControllerManagerPort,
			"scheduler":         machineSchedulerPort,
		},
		"etcdServers": "http://" + net.JoinHostPort(ip, strconv.Itoa(machineEtcdClientPort)),
		"etcd": map[string]any{
			"name": factEtcdName, "dataDir": factEtcdDataDir,
			"clientPort": machineEtcdClientPort, "peerPort": machineEtcdPeerPort,
			// The machine's disk is this host's: as for the processes.
			"fsync": false,
		},
		"pkiDir":                   factPKIDir,
		"kubeconfig":               factKubeconfig,
		"perControllerCredentials": false,
	}
}

// machineNetwork is the node network of a cluster whose control plane runs on
// a machine: the one its state records, else a free /24 (recorded by Up).
func (p *Provider) machineNetwork(ctx context.Context) (realnode.Network, error) {
	st, err := readState(p.opts.StateDir)
	if err != nil {
		return realnode.Network{}, err
	}
	if st != nil && st.Network != nil {
		return *st.Network, nil
	}
	id := realnode.ClusterID(p.opts.StateDir)
	subnet, err := realnode.ChooseSubnet(ctx, id)
	if err != nil {
		return realnode.Network{}, err
	}
	return realnode.Network{ID: id, Subnet: subnet}, nil
}

// checkMachineFacts says whether the static Pods were rendered with the
// control-plane machine's facts, and with bootstrap tokens on (the workers
// join with one).
func checkMachineFacts(args map[controlplane.Component][]string, ip string) error {
	hint := "render the control plane with the provider's Facts as the control-plane plugin's machine value"
	want := []struct {
		comp        controlplane.Component
		flag, value string
	}{
		{controlplane.APIServer, "advertise-address", ip},
		{controlplane.APIServer, "secure-port", strconv.Itoa(machineAPIServerPort)},
		{controlplane.APIServer, "etcd-servers", "http://" + net.JoinHostPort(ip, strconv.Itoa(machineEtcdClientPort))},
		{controlplane.APIServer, "enable-bootstrap-token-auth", "true"},
	}
	for _, w := range want {
		if got := flagValue(args[w.comp], w.flag); got != w.value {
			return fmt.Errorf("the rendered %s static Pod has --%s=%s; on the control-plane machine it must be %s: %s", w.comp, w.flag, got, w.value, hint)
		}
	}
	return nil
}

// checkControlPlaneMode refuses to move a cluster's control plane between
// this host's processes and a machine: neither move is built.
func (p *Provider) checkControlPlaneMode(st *state) error {
	i := slices.IndexFunc(st.Nodes, func(ns nodeState) bool { return ns.Name == ControlPlaneNode })
	if i < 0 {
		return nil
	}
	had := st.Nodes[i].Machine
	if had == p.cpMachine() {
		return nil
	}
	where := map[bool]string{false: "as processes on this host", true: "on a machine"}
	return fmt.Errorf("cluster %s runs its control plane %s, cluster.yaml asks for it %s (spec.provider.local.machinePools): moving a control plane is not built; run `kubeplug down` first",
		p.opts.ClusterName, where[had], where[p.cpMachine()])
}

// upControlPlaneMachine brings the cluster's node network and registry up,
// pushes the components' images, makes the PKI and boots the control-plane
// machines cps from their pool's rendered files (unless they run), then waits
// until the API server answers and connects to it. With several machines
// (ha.go), the load balancer's machine boots too, and a control-plane
// machine that is gone while the others keep etcd's quorum is replaced: its
// etcd member removed, a new machine booted as a new member.
//
// The machines of early (a new cluster's workers, recorded in st) boot while
// the control-plane machines do, with a bootstrap token stored once the API
// server answers: their kubelets retry until it does.
func (p *Provider) upControlPlaneMachine(ctx context.Context, d *provider.Desired, st *state, cps []*desiredNode, args map[controlplane.Component][]string, cl *provider.Running, early []*desiredNode, indexes map[string]int) (*realCluster, error) {
	cp := cps[0]
	ha := len(cps) > 1
	network := *p.cpNet
	serviceCIDR := flagValue(args[controlplane.APIServer], "service-cluster-ip-range")
	if err := checkNodeNetwork(network, flagValue(args[controlplane.ControllerManager], "cluster-cidr"), serviceCIDR); err != nil {
		return nil, err
	}
	if err := p.recordControlPlaneMachines(st, network, cps); err != nil {
		return nil, err
	}
	rc, err := p.ensureRealCluster(ctx, st, args)
	if err != nil {
		return nil, err
	}
	if err := p.pushComponentImages(ctx, rc, cp.machine); err != nil {
		return nil, err
	}
	members := haMembers(network, len(cps))
	lbIP := network.NodeIP(haLBIndex)
	pkiDir, server, err := p.controlPlanePKI(cp, members, lbIP, serviceCIDR, ha)
	if err != nil {
		return nil, err
	}
	kubeconfig := Kubeconfig(p.opts.StateDir)
	if err := p.prepareControlPlaneMachines(d, rc, cps); err != nil {
		return nil, err
	}
	h := &haPlane{rc: rc, cps: cps, members: members, clusterID: network.ID, pkiDir: pkiDir, server: server, kubeconfig: kubeconfig}
	if ha {
		if err := p.upLoadBalancer(ctx, rc, members); err != nil {
			return nil, err
		}
	}
	stopped, outdated := p.stoppedAndOutdated(ctx, cps)
	if len(stopped) == 0 {
		if err := p.connectControlPlane(ctx, cp.sys, kubeconfig); err != nil {
			return nil, err
		}
		return rc, p.rollControlPlane(ctx, h, outdated)
	}
	join, err := p.etcdJoin(ctx, h, stopped)
	if err != nil {
		return nil, err
	}
	token, err := p.pendingToken(early)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	if err := p.bootStopped(ctx, h, stopped, join); err != nil {
		return nil, err
	}
	if err := p.bootEarly(ctx, d, rc, early, indexes, token); err != nil {
		return nil, err
	}
	if err := p.waitBootedControlPlane(ctx, h, stopped, cl, lbIP, began); err != nil {
		return nil, err
	}
	return rc, p.rollControlPlane(ctx, h, outdated)
}

// waitBootedControlPlane waits until the stopped machines, which booted at
// began, have booted, marks the cluster started, connects to the API server
// and says where the control plane is ready.
func (p *Provider) waitBootedControlPlane(ctx context.Context, h *haPlane, stopped []int, cl *provider.Running, lbIP net.IP, began time.Time) error {
	// Several machines boot at once on this host's cores: give them longer.
	bootTimeout := 3 * time.Minute * time.Duration(min(len(stopped), 2))
	for _, i := range stopped {
		if err := h.cps[i].sys.WaitBooted(ctx, bootTimeout); err != nil {
			return err
		}
	}
	cl.Started = true
	cp := h.cps[0]
	if err := p.connectControlPlane(ctx, cp.sys, h.kubeconfig); err != nil {
		return err
	}
	where := "static Pods on machine " + cp.name
	if len(h.cps) > 1 {
		where = fmt.Sprintf("static Pods on %d machines behind the load balancer %s", len(h.cps), lbIP)
	}
	p.event("control-plane", "", fmt.Sprintf("control plane ready at %s in %s (%s)", h.server, time.Since(began).Round(time.Millisecond), where))
	return nil
}

// checkNodeNetwork refuses a node network that overlaps the Pods' or the
// Services' range of the control-plane plugin's values.
func checkNodeNetwork(network realnode.Network, clusterCIDR, serviceCIDR string) error {
	for _, c := range []string{clusterCIDR, serviceCIDR} {
		if overlaps(network.Subnet, c) {
			return fmt.Errorf("the node network %s overlaps %s of the control-plane plugin's values: choose another clusterCIDR or serviceClusterIPRange", network.Subnet, c)
		}
	}
	return nil
}

// recordControlPlaneMachines refuses a changed count of control-plane
// machines, then records the machines (and the load balancer's, with several)
// in st and writes it, before anything of them exists, so that Down finds
// them after a crash.
func (p *Provider) recordControlPlaneMachines(st *state, network realnode.Network, cps []*desiredNode) error {
	recorded := 0
	for _, ns := range st.Nodes {
		if ns.Role == model.RoleControlPlane && ns.Machine {
			recorded++
		}
	}
	if recorded > 0 && recorded != len(cps) {
		return fmt.Errorf("spec.controlPlane.count is %d, cluster %s runs %d control-plane machines: changing the count of a running cluster's control plane is not built; run `kubeplug down --purge` first (take a snapshot with `kubeplug etcd snapshot` to keep its objects)", len(cps), p.opts.ClusterName, recorded)
	}
	st.Network = &network
	for i, n := range cps {
		j := slices.IndexFunc(st.Nodes, func(ns nodeState) bool { return ns.Name == n.name })
		entry := nodeState{Name: n.name, Pool: n.pool, Role: n.role, Real: true, RealIndex: i, Machine: true}
		if j < 0 {
			st.Nodes = slices.Insert(st.Nodes, min(i, len(st.Nodes)), entry)
		} else {
			entry.Joined = st.Nodes[j].Joined
			st.Nodes[j] = entry
		}
	}
	if len(cps) > 1 {
		st.LoadBalancer = &nodeState{Name: haLBName, Pool: model.ControlPlanePool, Role: "load-balancer", Real: true, RealIndex: haLBIndex, Machine: true}
	}
	return writeState(p.opts.StateDir, st)
}

// controlPlanePKI makes the cluster's PKI in the first control-plane
// machine's root and the admin kubeconfig, and says where the PKI is and the
// API server's URL: the first machine's, or, with several (ha), the load
// balancer's at lbIP, which the API server's certificate names too, with
// etcd's peer certificates.
func (p *Provider) controlPlanePKI(cp *desiredNode, members []haMember, lbIP net.IP, serviceCIDR string, ha bool) (pkiDir, server string, err error) {
	var ips []net.IP
	for _, m := range members {
		ips = append(ips, m.IP)
	}
	svcIP, err := nthIP(serviceCIDR, 1)
	if err != nil {
		return "", "", err
	}
	pkiDir = filepath.Join(p.machineRoot(cp.name), "etc", "kubernetes", "pki")
	server = "https://" + net.JoinHostPort(ips[0].String(), strconv.Itoa(machineAPIServerPort))
	if ha {
		if err := clusterpki.EnsurePKI(pkiDir, net.ParseIP(svcIP), append(slices.Clone(ips), lbIP)...); err != nil {
			return "", "", err
		}
		if err := clusterpki.EnsureEtcdPeerPKI(pkiDir, ips...); err != nil {
			return "", "", err
		}
		server = "https://" + net.JoinHostPort(lbIP.String(), strconv.Itoa(machineAPIServerPort))
	} else if err := clusterpki.EnsurePKI(pkiDir, net.ParseIP(svcIP), ips[0]); err != nil {
		return "", "", err
	}
	if _, err := clusterpki.WriteAdminKubeconfig(pkiDir, server, p.cpOptions().ContextName, Kubeconfig(p.opts.StateDir)); err != nil {
		return "", "", err
	}
	return pkiDir, server, nil
}

// prepareControlPlaneMachines gives each of cps its machine from the pool's
// user data, refusing to replace the one machine of a single control plane:
// etcd's data is on it.
func (p *Provider) prepareControlPlaneMachines(d *provider.Desired, rc *realCluster, cps []*desiredNode) error {
	ud, err := userData(d, cps[0].pool)
	if err != nil {
		return err
	}
	for i, n := range cps {
		m, err := p.machineFor(rc, n, i, ud)
		if err != nil {
			return err
		}
		n.sys, n.real = m, m.Node
		if p.replacing(n) && len(cps) == 1 {
			return fmt.Errorf("machine %s: the control-plane pool's boot files changed (a new Kubernetes version, a control-plane flag or file), and replacing the one control-plane machine would lose etcd's data on it: run `kubeplug down` and `kubeplug up` to make the cluster anew (`kubeplug etcd snapshot` and `up --restore-from` keep its objects), or run three control-plane machines (spec.controlPlane.count: 3), which are replaced one at a time", n.name)
		}
	}
	return nil
}

// stoppedAndOutdated says which of cps are not running, and, with several,
// which running ones have older boot files (a new Kubernetes version):
// those are replaced one at a time once the control plane answers
// (cpupgrade.go). A stopped one boots anew from the new files anyway.
func (p *Provider) stoppedAndOutdated(ctx context.Context, cps []*desiredNode) (stopped, outdated []int) {
	for i, n := range cps {
		if !n.sys.Running(ctx) {
			stopped = append(stopped, i)
		}
	}
	for i, n := range cps {
		if len(cps) > 1 && p.replacing(n) && !slices.Contains(stopped, i) {
			outdated = append(outdated, i)
		}
	}
	return stopped, outdated
}

// pendingToken makes the bootstrap token the machines of early boot with,
// if any, and keeps it in a file until it is stored in the cluster: an up
// interrupted before that stores it the next time, or the machines that
// boot with it could never join.
func (p *Provider) pendingToken(early []*desiredNode) (string, error) {
	if len(early) == 0 {
		return "", nil
	}
	token, err := bootstraptoken.New()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(p.pendingTokenFile(), []byte(token), 0o600); err != nil {
		return "", err
	}
	return token, nil
}

// etcdJoin says how the etcd members of the stopped control-plane machines
// start: all of them as a new cluster (a new cluster, or one whose machines
// all stopped: their data is there), or, with several machines of which only
// some are lost, the lost ones as new members of the others' cluster, which
// must answer.
func (p *Provider) etcdJoin(ctx context.Context, h *haPlane, stopped []int) (etcdJoin, error) {
	join := etcdJoin{initial: initialCluster(h.members), state: "new"}
	if len(h.cps) == 1 || len(stopped) == len(h.cps) {
		return join, nil
	}
	for i, m := range h.members {
		if !slices.Contains(stopped, i) {
			join.endpoints = append(join.endpoints, m.clientURL())
		}
	}
	if _, err := etcdMembers(ctx, join.endpoints); err != nil {
		return join, fmt.Errorf("cluster %s: %d of %d control-plane machines are gone: %w", p.opts.ClusterName, len(stopped), len(h.cps), err)
	}
	join.state = "existing"
	return join, nil
}

// etcdJoin is how stopped control-plane machines' etcd members start: the
// initial cluster and state of etcd's flags, and, joining an existing
// cluster, the endpoints of its running members.
type etcdJoin struct {
	initial, state string
	endpoints      []string
}

// bootStopped boots the stopped control-plane machines: the one machine of a
// single control plane, or each of several as join says, a lost one replaced
// with its etcd member.
func (p *Provider) bootStopped(ctx context.Context, h *haPlane, stopped []int, join etcdJoin) error {
	if len(h.cps) == 1 {
		extra, err := p.controlPlaneFiles(h.pkiDir, h.server, h.server, h.cps[0].name)
		if err != nil {
			return err
		}
		return p.startCPMachine(ctx, h, 0, extra, false, true)
	}
	for _, i := range stopped {
		n := h.cps[i]
		memberInitial := join.initial
		if join.state == "existing" {
			// A machine lost with its etcd member: a new machine, a new
			// member in its place (kops' etcd-manager and kubeadm's
			// documented replacement).
			p.event("control-plane", n.name, fmt.Sprintf("machine %s is gone: replacing it and its etcd member", n.name))
			if err := n.sys.Remove(ctx); err != nil {
				return err
			}
			var err error
			if memberInitial, err = replaceEtcdMember(ctx, join.endpoints, n.name, h.members[i].peerURL()); err != nil {
				return fmt.Errorf("machine %s: %w", n.name, err)
			}
		}
		if err := p.bootMember(ctx, h, i, memberInitial, join.state, true); err != nil {
			return err
		}
	}
	return nil
}

// connectControlPlane waits for the API server and connects to it, and
// stores a pending bootstrap token.
func (p *Provider) connectControlPlane(ctx context.Context, m *realnode.Machine, kubeconfig string) error {
	if err := p.waitAPIServer(ctx, m, kubeconfig, 4*time.Minute); err != nil {
		return err
	}
	var err error
	if p.cp, err = controlplane.Connect(kubeconfig); err != nil {
		return err
	}
	return p.storePendingToken(ctx)
}

// upLoadBalancer boots the load balancer's machine unless it runs: it keeps
// nothing, so a lost one simply boots again.
func (p *Provider) upLoadBalancer(ctx context.Context, rc *realCluster, members []haMember) error {
	n := &desiredNode{name: haLBName, pool: model.ControlPlanePool, role: "load-balancer"}
	m, err := p.machineFor(rc, n, haLBIndex, lbUserData(members))
	if err != nil {
		return err
	}
	if m.Running(ctx) {
		return nil
	}
	p.event("control-plane", haLBName, "booting the load balancer machine "+haLBName+" at "+rc.network.NodeIP(haLBIndex).String()+" (HAProxy)")
	if err := m.Start(ctx); err != nil {
		return err
	}
	return m.WaitBooted(ctx, 3*time.Minute)
}

// pendingTokenFile holds the bootstrap token of machines booted before the
// API server could store it.
func (p *Provider) pendingTokenFile() string {
	return filepath.Join(p.opts.StateDir, "bootstrap-token.pending")
}

// storePendingToken stores the pending bootstrap token, if any, in the cluster
// and forgets it.
func (p *Provider) storePendingToken(ctx context.Context) error {
	b, err := os.ReadFile(p.pendingTokenFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := p.storeBootstrap(ctx, strings.TrimSpace(string(b))); err != nil {
		return err
	}
	return os.Remove(p.pendingTokenFile())
}

// bootEarly starts the machines of nodes, which join with token.
func (p *Provider) bootEarly(ctx context.Context, d *provider.Desired, rc *realCluster, nodes []*desiredNode, indexes map[string]int, token string) error {
	for _, n := range nodes {
		ud, err := userData(d, n.pool)
		if err != nil {
			return err
		}
		if n.sys, err = p.machineFor(rc, n, indexes[n.name], ud); err != nil {
			return err
		}
		n.real = n.sys.Node
		kp, err := p.keyPairFiles(n.sys.Node.PKIDir, n)
		if err != nil {
			return fmt.Errorf("machine %s: %w", n.name, err)
		}
		if n.sys.VendorData, err = p.vendorData(n.sys, rc, token, kp...); err != nil {
			return fmt.Errorf("machine %s: %w", n.name, err)
		}
		p.nodeEvent(n.name, n.name, "machine "+n.name+" booting", false)
		if err := n.sys.Start(ctx); err != nil {
			return err
		}
		if err := os.WriteFile(p.instanceIDFile(n.name), []byte(n.sys.InstanceID), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// overlaps says whether two CIDRs share an address; an unparsable one does not.
func overlaps(a, b string) bool {
	_, x, errA := net.ParseCIDR(a)
	_, y, errB := net.ParseCIDR(b)
	return errA == nil && errB == nil && (x.Contains(y.IP) || y.Contains(x.IP))
}

// pushComponentImages pushes, under the names the rendered static Pods give
// them, images of the cluster's own Kubernetes programs (ComponentImage): the
// machine's containerd pulls them through the cluster's registry.
func (p *Provider) pushComponentImages(ctx context.Context, rc *realCluster, m *render.Machine) error {
	binDir := p.binDirOrDefault()
	if binDir == "" {
		d, err := controlplane.FindBinDir("")
		if err != nil {
			return err
		}
		binDir = d
	}
	type want struct{ image, command string }
	byProgram := map[string][]want{}
	var programs []string
	pods, err := staticPods(m)
	if err != nil {
		return err
	}
	for _, sp := range pods {
		for _, c := range sp.pod.Spec.Containers {
			if len(c.Command) == 0 {
				return fmt.Errorf("static Pod %s: container %s names no command", sp.file, c.Name)
			}
			cmd := c.Command[0]
			prog, err := filepath.EvalSymlinks(filepath.Join(binDir, filepath.Base(cmd)))
			if err != nil {
				return fmt.Errorf("static Pod %s runs %s, which this cluster's Kubernetes programs (%s) do not have: %w", sp.file, cmd, binDir, err)
			}
			if _, ok := byProgram[prog]; !ok {
				programs = append(programs, prog)
			}
			byProgram[prog] = append(byProgram[prog], want{image: c.Image, command: filepath.Base(cmd)})
		}
	}
	for _, prog := range programs {
		var names []string
		for _, w := range byProgram[prog] {
			names = append(names, w.command)
		}
		slices.Sort(names)
		img, err := nodeimage.ComponentImage(prog, slices.Compact(names)...)
		if err != nil {
			return err
		}
		for _, w := range byProgram[prog] {
			t, err := name.NewTag(w.image)
			if err != nil {
				return fmt.Errorf("static Pod image %q: %w", w.image, err)
			}
			if _, err := rc.registry.PushImage(ctx, t.RepositoryStr(), t.TagStr(), img); err != nil {
				return fmt.Errorf("image %s: %w", w.image, err)
			}
		}
	}
	return nil
}

// controlPlaneFiles are the control-plane machine's part of its vendor data:
// the PKI (read from pkiDir; its etcd/ directory too, a stacked etcd's peer
// PKI), the components' kubeconfig for the API server at server, and the
// kubelet's kubeconfig for the API server at kubeletServer, with a client
// certificate of its own (a kubeadm control-plane node's kubelet.conf: its
// kubelet runs the static Pods before any API server could answer a
// bootstrap).
func (p *Provider) controlPlaneFiles(pkiDir, server, kubeletServer, node string) ([]vendorFile, error) {
	out, err := pkiFiles(pkiDir)
	if err != nil {
		return nil, err
	}
	admin, err := clusterpki.WriteAdminKubeconfig(pkiDir, server, "kubernetes-admin")
	if err != nil {
		return nil, err
	}
	b, err := clientcmd.Write(*admin)
	if err != nil {
		return nil, err
	}
	out = append(out, vendorFile{factKubeconfig, "0600", string(b)})
	dir := filepath.Join(p.machineDir(node), "pki")
	cert, key := filepath.Join(dir, "kubelet-client.crt"), filepath.Join(dir, "kubelet-client.key")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := clusterpki.IssueClientCert(pkiDir, cert, key, "system:node:"+node, "system:nodes"); err != nil {
		return nil, err
	}
	certPEM, err := bounded.ReadFile(cert, 1<<20)
	if err != nil {
		return nil, err
	}
	keyPEM, err := bounded.ReadFile(key, 1<<20)
	if err != nil {
		return nil, err
	}
	kubelet := *admin
	kubelet.Clusters = map[string]*clientcmdapi.Cluster{}
	for name, c := range admin.Clusters {
		kc := *c
		kc.Server = kubeletServer
		kubelet.Clusters[name] = &kc
	}
	kubelet.AuthInfos = map[string]*clientcmdapi.AuthInfo{"kubernetes-admin": {ClientCertificateData: certPEM, ClientKeyData: keyPEM}}
	b, err = clientcmd.Write(kubelet)
	if err != nil {
		return nil, err
	}
	out = append(out, vendorFile{render.KubeletKubeconfigPath, "0600", string(b)})
	return out, nil
}

// pkiFiles are the files of the PKI directory (and its etcd/ directory, a
// stacked etcd's peer PKI) as vendor files under factPKIDir, keys 0600.
func pkiFiles(pkiDir string) ([]vendorFile, error) {
	var out []vendorFile
	for _, sub := range []string{"", "etcd"} {
		entries, err := os.ReadDir(filepath.Join(pkiDir, sub))
		if errors.Is(err, os.ErrNotExist) && sub != "" {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
				continue
			}
			b, err := bounded.ReadFile(filepath.Join(pkiDir, sub, e.Name()), 1<<20)
			if err != nil {
				return nil, err
			}
			mode := "0644"
			if strings.HasSuffix(e.Name(), ".key") {
				mode = "0600"
			}
			out = append(out, vendorFile{path.Join(factPKIDir, sub, e.Name()), mode, string(b)})
		}
	}
	return out, nil
}

// waitAPIServer waits until the API server on the control-plane machine is
// ready; on timeout the error carries the machine's kubelet journal.
func (p *Provider) waitAPIServer(ctx context.Context, m *realnode.Machine, kubeconfig string, timeout time.Duration) error {
	return p.waitAPIServerAt(ctx, m, kubeconfig, "", timeout)
}

// waitAPIServerAt is waitAPIServer for the API server at host (a URL; empty:
// the kubeconfig's server) with the kubeconfig's credentials.
func (p *Provider) waitAPIServerAt(ctx context.Context, m *realnode.Machine, kubeconfig, host string, timeout time.Duration) error {
	cfg, err := clientcmd.BuildConfigFromFlags(host, kubeconfig)
	if err != nil {
		return err
	}
	cfg.Timeout = 5 * time.Second
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz: %s", resp.Status)
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("machine %s: the API server of its static Pod is not ready after %s (last: %w); kubelet's journal:\n%s", m.Node.Name, timeout, last, m.Journal(ctx, "kubelet.service", 30))
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), last)
		case <-time.After(time.Second):
		}
	}
}

// waitStaticPods waits until the mirror Pod of each of the node's static Pods
// (render.StaticPodDir in m) runs with its containers ready: the control plane
// runs as rendered, or up fails naming the component and why it is not ready.
func waitStaticPods(ctx context.Context, client kubernetes.Interface, node string, m *render.Machine, timeout time.Duration) error {
	pods, err := staticPods(m)
	if err != nil {
		return err
	}
	var names []string
	for _, sp := range pods {
		names = append(names, sp.pod.Name+"-"+node) // the kubelet's mirror Pod
	}
	deadline := time.Now().Add(timeout)
	for {
		var waiting []string
		for _, name := range names {
			pod, err := client.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
			switch {
			case err != nil:
				waiting = append(waiting, name+": "+err.Error())
			case !podReady(pod):
				why := string(pod.Status.Phase)
				for _, cs := range pod.Status.ContainerStatuses {
					if w := cs.State.Waiting; w != nil {
						why += ", " + w.Reason + ": " + w.Message
					}
					if t := cs.LastTerminationState.Terminated; t != nil {
						why += fmt.Sprintf(", last exit %d: %s", t.ExitCode, t.Message)
					}
				}
				waiting = append(waiting, name+": "+why)
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("machine %s: static Pods not ready after %s: %s", node, timeout, strings.Join(waiting, "; "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// staticPod is a static Pod among a machine's files.
type staticPod struct {
	file string
	pod  corev1.Pod
}

// staticPods decodes the static Pods among m's files (render.StaticPodDir),
// in file order.
func staticPods(m *render.Machine) ([]staticPod, error) {
	var out []staticPod
	for _, f := range m.Files {
		if path.Dir(f.Path) != render.StaticPodDir || !strings.HasSuffix(f.Path, ".yaml") {
			continue
		}
		sp := staticPod{file: f.Path}
		if err := yaml.Unmarshal(f.Content, &sp.pod); err != nil {
			return nil, fmt.Errorf("static Pod %s: %w", f.Path, err)
		}
		out = append(out, sp)
	}
	return out, nil
}

// checkControlPlaneCount refuses, before anything starts, a control plane
// the provider cannot run (spec.controlPlane.count): an even count (an even
// number of etcd members tolerates no more failures than one fewer), more
// than one control-plane node as processes on this host. An odd count above
// one on machines is a stacked control plane behind a load balancer (ha.go).
func (p *Provider) checkControlPlaneCount(m *model.Model) error {
	n := cpCount(m)
	p.haCount = 0
	switch {
	case n == 1:
		return nil
	case n%2 == 0:
		return fmt.Errorf("spec.controlPlane.count is %d: the control plane's etcd needs an odd number of members (%d tolerate no more failures than %d); use 1 or 3", n, n, n-1)
	case !p.cpMachine():
		return fmt.Errorf("spec.controlPlane.count is %d: the local provider runs a control plane as processes on this host only once; several control-plane nodes need machines (spec.provider.local.machinePools: [%s])", n, model.ControlPlanePool)
	}
	p.haCount = n
	return nil
}
