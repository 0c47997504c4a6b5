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
	"github.com/kubeplug/kubeplug/internal/controlplane"
	"github.com/kubeplug/kubeplug/internal/localnode"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
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
func (p *Provider) machineNetwork(ctx context.Context) (localnode.Network, error) {
	st, err := readState(p.opts.StateDir)
	if err != nil {
		return localnode.Network{}, err
	}
	if st != nil && st.Network != nil {
		return *st.Network, nil
	}
	id := localnode.ClusterID(p.opts.StateDir)
	subnet, err := localnode.ChooseSubnet(ctx, id)
	if err != nil {
		return localnode.Network{}, err
	}
	return localnode.Network{ID: id, Subnet: subnet}, nil
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
// machine from its pool's rendered files (unless it runs), then waits until its
// API server answers and connects to it.
//
// The machines of early (a new cluster's workers, recorded in st) boot while
// the control-plane machine does, with a bootstrap token stored once its API
// server answers: their kubelets retry until it does.
func (p *Provider) upControlPlaneMachine(ctx context.Context, d *provider.Desired, st *state, cp *desiredNode, args map[controlplane.Component][]string, cl *provider.Running, early []*desiredNode, indexes map[string]int) (*realCluster, error) {
	network := *p.cpNet
	clusterCIDR := flagValue(args[controlplane.ControllerManager], "cluster-cidr")
	serviceCIDR := flagValue(args[controlplane.APIServer], "service-cluster-ip-range")
	for _, c := range []string{clusterCIDR, serviceCIDR} {
		if overlaps(network.Subnet, c) {
			return nil, fmt.Errorf("the node network %s overlaps %s of the control-plane plugin's values: choose another clusterCIDR or serviceClusterIPRange", network.Subnet, c)
		}
	}
	// The machine is recorded before anything of it exists, so that Down
	// finds it after a crash.
	st.Network = &network
	i := slices.IndexFunc(st.Nodes, func(ns nodeState) bool { return ns.Name == cp.name })
	entry := nodeState{Name: cp.name, Pool: cp.pool, Role: cp.role, Real: true, RealIndex: cpMachineIndex, Machine: true}
	if i < 0 {
		st.Nodes = append([]nodeState{entry}, st.Nodes...)
	} else {
		entry.Joined = st.Nodes[i].Joined
		st.Nodes[i] = entry
	}
	if err := writeState(p.opts.StateDir, st); err != nil {
		return nil, err
	}
	rc, err := p.ensureRealCluster(ctx, st, args)
	if err != nil {
		return nil, err
	}
	if err := p.pushComponentImages(ctx, rc, cp.machine); err != nil {
		return nil, err
	}
	ip := network.NodeIP(cpMachineIndex)
	svcIP, err := nthIP(serviceCIDR, 1)
	if err != nil {
		return nil, err
	}
	pkiDir := filepath.Join(p.machineRoot(cp.name), "etc", "kubernetes", "pki")
	if err := controlplane.EnsurePKI(pkiDir, net.ParseIP(svcIP), ip); err != nil {
		return nil, err
	}
	server := "https://" + net.JoinHostPort(ip.String(), strconv.Itoa(machineAPIServerPort))
	kubeconfig := Kubeconfig(p.opts.StateDir)
	if _, err := controlplane.WriteAdminKubeconfig(pkiDir, server, p.cpOptions().ContextName, kubeconfig); err != nil {
		return nil, err
	}
	ud, err := userData(d, cp.pool)
	if err != nil {
		return nil, err
	}
	m, err := p.machineFor(rc, cp, cpMachineIndex, ud)
	if err != nil {
		return nil, err
	}
	cp.sys, cp.real = m, m.Node
	if p.replacing(cp) {
		return nil, fmt.Errorf("machine %s: the control-plane pool's boot files changed, and replacing the control-plane machine (a single etcd member) is not built: run `kubeplug down` and `kubeplug up` to make the cluster anew", cp.name)
	}
	if !m.Running(ctx) {
		var token string
		if len(early) > 0 {
			if token, err = newBootstrapToken(); err != nil {
				return nil, err
			}
			// Kept until it is stored in the cluster: an up interrupted
			// before that stores it the next time, or the machines that
			// boot with it could never join.
			if err := os.WriteFile(p.pendingTokenFile(), []byte(token), 0o600); err != nil {
				return nil, err
			}
		}
		extra, err := p.controlPlaneFiles(pkiDir, server, cp.name)
		if err != nil {
			return nil, err
		}
		vd, err := p.vendorData(m, rc, "", extra...)
		if err != nil {
			return nil, fmt.Errorf("machine %s: %w", cp.name, err)
		}
		m.VendorData = vd
		p.event("control-plane", "", "booting the control-plane machine "+cp.name+" at "+ip.String())
		began := time.Now()
		if err := m.Start(ctx); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p.instanceIDFile(cp.name), []byte(m.InstanceID), 0o644); err != nil {
			return nil, err
		}
		if err := p.bootEarly(ctx, d, rc, early, indexes, token); err != nil {
			return nil, err
		}
		if err := m.WaitBooted(ctx, 3*time.Minute); err != nil {
			return nil, err
		}
		cl.Started = true
		if err := p.waitAPIServer(ctx, m, kubeconfig, 4*time.Minute); err != nil {
			return nil, err
		}
		if p.cp, err = controlplane.Connect(kubeconfig); err != nil {
			return nil, err
		}
		if err := p.storePendingToken(ctx); err != nil {
			return nil, err
		}
		p.event("control-plane", "", fmt.Sprintf("control plane ready at %s in %s (static Pods on machine %s)", server, time.Since(began).Round(time.Millisecond), cp.name))
		return rc, nil
	}
	if err := p.waitAPIServer(ctx, m, kubeconfig, 4*time.Minute); err != nil {
		return nil, err
	}
	if p.cp, err = controlplane.Connect(kubeconfig); err != nil {
		return nil, err
	}
	if err := p.storePendingToken(ctx); err != nil {
		return nil, err
	}
	return rc, nil
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
		if n.sys.VendorData, err = p.vendorData(n.sys, rc, token); err != nil {
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
		img, err := localnode.ComponentImage(prog, slices.Compact(names)...)
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
// the PKI (read from pkiDir), the components' kubeconfig for the API server at
// server, and the kubelet's kubeconfig with a client certificate of its own
// (a kubeadm control-plane node's kubelet.conf: its kubelet runs the static
// Pods before any API server could answer a bootstrap).
func (p *Provider) controlPlaneFiles(pkiDir, server, node string) ([]vendorFile, error) {
	entries, err := os.ReadDir(pkiDir)
	if err != nil {
		return nil, err
	}
	var out []vendorFile
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		b, err := bounded.ReadFile(filepath.Join(pkiDir, e.Name()), 1<<20)
		if err != nil {
			return nil, err
		}
		mode := "0644"
		if strings.HasSuffix(e.Name(), ".key") {
			mode = "0600"
		}
		out = append(out, vendorFile{path.Join(factPKIDir, e.Name()), mode, string(b)})
	}
	admin, err := controlplane.WriteAdminKubeconfig(pkiDir, server, "kubernetes-admin")
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
	if err := controlplane.IssueClientCert(pkiDir, cert, key, "system:node:"+node, "system:nodes"); err != nil {
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
	kubelet.AuthInfos = map[string]*clientcmdapi.AuthInfo{"kubernetes-admin": {ClientCertificateData: certPEM, ClientKeyData: keyPEM}}
	b, err = clientcmd.Write(kubelet)
	if err != nil {
		return nil, err
	}
	out = append(out, vendorFile{render.KubeletKubeconfigPath, "0600", string(b)})
	return out, nil
}

// waitAPIServer waits until the API server on the control-plane machine is
// ready; on timeout the error carries the machine's kubelet journal.
func (p *Provider) waitAPIServer(ctx context.Context, m *localnode.Machine, kubeconfig string, timeout time.Duration) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
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
// than one control-plane node as processes on this host, and — not built
// yet — more than one control-plane machine (docs/ha.md).
func (p *Provider) checkControlPlaneCount(m *model.Model) error {
	pool := m.Pools[model.ControlPlanePool]
	if pool == nil || pool.Count <= 1 {
		return nil
	}
	switch {
	case pool.Count%2 == 0:
		return fmt.Errorf("spec.controlPlane.count is %d: the control plane's etcd needs an odd number of members (%d tolerate no more failures than %d); use 1 or 3", pool.Count, pool.Count, pool.Count-1)
	case !p.cpMachine():
		return fmt.Errorf("spec.controlPlane.count is %d: the local provider runs a control plane as processes on this host only once; several control-plane nodes need machines (spec.provider.local.machinePools: [%s])", pool.Count, model.ControlPlanePool)
	default:
		return fmt.Errorf("spec.controlPlane.count is %d: several control-plane machines (stacked etcd behind a load balancer) are not built yet in the local provider; use 1 (docs/ha.md says what is built)", pool.Count)
	}
}
