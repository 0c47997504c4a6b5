package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
	"github.com/kubeplug/kubeplug/pkg/provider/nodeimage"
)

// NodeBinDirEnv overrides where the real nodes' programs are (make localnode).
const NodeBinDirEnv = "KUBEPLUG_LOCALNODE_BIN"

// ImagesDirEnv overrides where the built-in images' programs are (make images).
const ImagesDirEnv = "KUBEPLUG_IMAGES_BIN"

// registryDir is the cluster registry's data directory in the state dir.
const registryDir = "registry"

// pauseImage is the sandbox image's repository and tag in the cluster registry.
const pauseRepo, pauseTag = "kubeplug/pause", "local"

// kubeletFlagsOwned are kubelet flags kubeplug sets for a real node; a plugin's
// value for one of them is left out (with an event), as it would disconnect
// the node from its runtime, network or cluster.
var kubeletFlagsOwned = map[string]bool{
	"config": true, "kubeconfig": true, "root-dir": true, "cert-dir": true, "hostname-override": true,
	"node-ip": true, "container-runtime-endpoint": true, "cgroup-driver": true, "cgroup-root": true,
	"bootstrap-kubeconfig": true, "pod-manifest-path": true,
}

// realPool says whether pool's nodes are real.
func (p *Provider) realPool(pool string) bool {
	return slices.Contains(p.opts.RealPools, pool) || p.machinePool(pool)
}

// checkRealPools refuses real pools that name no worker pool of the model.
func (p *Provider) checkRealPools(m *model.Model) error {
	for field, names := range map[string][]string{"realPools": p.opts.RealPools, "machinePools": p.opts.MachinePools} {
		for _, name := range names {
			pool := m.Pools[name]
			switch {
			case pool == nil:
				return fmt.Errorf("spec.provider.local.%s: no node pool %q (pools: %s)", field, name, strings.Join(workerPools(m), ", "))
			case pool.Role == model.RoleControlPlane && field == "realPools":
				return fmt.Errorf("spec.provider.local.%s: %q is the control plane's pool; only worker pools can be real (the control plane can run on a machine: name it in machinePools)", field, name)
			case field == "machinePools" && slices.Contains(p.opts.RealPools, name):
				return fmt.Errorf("spec.provider.local: pool %q is in both realPools and machinePools; name it in one", name)
			}
		}
	}
	return nil
}

func workerPools(m *model.Model) []string {
	var out []string
	for _, n := range m.PoolNames() {
		if m.Pools[n].Role != model.RoleControlPlane {
			out = append(out, n)
		}
	}
	return out
}

// nodeBins finds the real nodes' programs.
func (p *Provider) nodeBins() (realnode.Bins, string, error) {
	dir := p.opts.NodeBinDir
	if dir == "" {
		dir = os.Getenv(NodeBinDirEnv)
	}
	binDir := p.binDirOrDefault()
	if binDir == "" {
		var err error
		if binDir, err = controlplane.FindBinDir(""); err != nil {
			return realnode.Bins{}, "", err
		}
	}
	if dir == "" {
		// Beside the binaries built from Go modules (make localcluster), also
		// when the cluster's Kubernetes binaries come from the binary cache.
		src := p.opts.BinDir
		if src == "" {
			src = os.Getenv(controlplane.BinDirEnv)
		}
		if src == "" {
			if d, err := controlplane.FindBinDir(""); err == nil {
				src = d
			} else {
				src = binDir
			}
		}
		dir = filepath.Join(filepath.Dir(filepath.Dir(src)), "localnode", "bin")
	}
	return realnode.Bins{
		Kubelet:    filepath.Join(binDir, "kubelet"),
		KubeProxy:  filepath.Join(binDir, "kube-proxy"),
		Containerd: filepath.Join(dir, "containerd"),
		Runc:       "/usr/sbin/runc",
		CNI:        "/usr/lib/cni",
	}, dir, nil
}

// preflightReal checks the machine before anything starts, when a real pool
// has nodes.
func (p *Provider) preflightReal(m *model.Model) error {
	if err := p.checkRealPools(m); err != nil {
		return err
	}
	wanted, machines := false, false
	for _, name := range p.opts.RealPools {
		wanted = wanted || m.Pools[name].Count > 0
	}
	for _, name := range p.opts.MachinePools {
		machines = machines || m.Pools[name].Count > 0
	}
	if !wanted && !machines {
		return nil
	}
	bins, dir, err := p.nodeBins()
	if err != nil {
		return err
	}
	if err := realnode.Preflight(bins, filepath.Join(dir, "kubeplug-registry")); err != nil {
		return err
	}
	if machines {
		imgDir, err := p.machineImageDir()
		if err != nil {
			return err
		}
		if err := realnode.MachinePreflight(imgDir); err != nil {
			return fmt.Errorf("spec.provider.local.machinePools: %w", err)
		}
	}
	return nil
}

// imagesDir is where the built-in images' programs are (make images).
func (p *Provider) imagesDir() (string, error) {
	if d := os.Getenv(ImagesDirEnv); d != "" {
		return d, nil
	}
	_, dir, err := p.nodeBins()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(dir), "..", "images", "bin"), nil
}

// preflightOnDemand finds the on-demand built-in images the model runs
// (onDemandImages) before anything starts, for ensureRealCluster to push.
func (p *Provider) preflightOnDemand(m *model.Model) error {
	p.onDemand = nil
	needed := false
	for _, b := range nodeimage.BuiltinImages {
		needed = needed || b.OnDemand && runBy(m, b.Image) != ""
	}
	if !needed {
		return nil
	}
	dir := ""
	if p.hasRealNodes(m) {
		var err error
		if dir, err = p.imagesDir(); err != nil {
			return err
		}
	}
	imgs, err := p.onDemandImages(m, dir)
	p.onDemand = imgs
	return err
}

// realCluster is what a real node needs of the cluster: its network, registry
// and CIDRs.
type realCluster struct {
	network     realnode.Network
	registry    *realnode.Registry
	bins        realnode.Bins
	clusterCIDR string
	clusterDNS  string
	sandbox     string
}

// ensureRealCluster brings up what the real nodes share: the node network
// (chosen once and recorded in the state), the registry with the pause image,
// and the kubernetes Service's endpoint at the gateway.
func (p *Provider) ensureRealCluster(ctx context.Context, st *state, args map[controlplane.Component][]string) (*realCluster, error) {
	bins, dir, err := p.nodeBins()
	if err != nil {
		return nil, err
	}
	clusterCIDR := flagValue(args[controlplane.ControllerManager], "cluster-cidr")
	serviceCIDR := flagValue(args[controlplane.APIServer], "service-cluster-ip-range")
	if clusterCIDR == "" || serviceCIDR == "" {
		return nil, errors.New("real nodes need the controller manager's --cluster-cidr and the API server's --service-cluster-ip-range (the control-plane plugin sets both)")
	}
	if err := p.recordNetwork(ctx, st, clusterCIDR, serviceCIDR); err != nil {
		return nil, err
	}
	network := *st.Network
	p.event("node-network", "", "node network "+network.Subnet+" on bridge "+network.Bridge())
	if err := network.EnsureBridge(ctx); err != nil {
		return nil, err
	}
	reg := &realnode.Registry{Bin: filepath.Join(dir, "kubeplug-registry"), Dir: filepath.Join(p.opts.StateDir, registryDir), Network: network, Progress: p.pushEvent}
	if err := reg.Start(ctx); err != nil {
		return nil, err
	}
	sandbox, err := p.pushSandbox(ctx, reg, filepath.Join(dir, "pause"))
	if err != nil {
		return nil, err
	}
	if err := p.pushImages(ctx, reg); err != nil {
		return nil, err
	}
	if !p.cpMachine() { // on a machine, its API server keeps its own endpoint
		if err := p.ensureAPIEndpoint(ctx, network); err != nil {
			return nil, err
		}
	}
	dns, err := nthIP(serviceCIDR, 10)
	if err != nil {
		return nil, err
	}
	return &realCluster{network: network, registry: reg, bins: bins, clusterCIDR: clusterCIDR, clusterDNS: dns, sandbox: sandbox}, nil
}

// recordNetwork chooses the node network once (apart from the Pods' and the
// Services' ranges) and records it in the state, with the port of the API
// server when it runs on this host, before anything exists, so that Down
// finds it after a crash.
func (p *Provider) recordNetwork(ctx context.Context, st *state, clusterCIDR, serviceCIDR string) error {
	if st.Network == nil {
		id := realnode.ClusterID(p.opts.StateDir)
		subnet, err := realnode.ChooseSubnet(ctx, id, clusterCIDR, serviceCIDR)
		if err != nil {
			return err
		}
		st.Network = &realnode.Network{ID: id, Subnet: subnet}
	}
	st.Network.APIServerPort = 0 // a control-plane machine's API server is not on this host
	if !p.cpMachine() {
		st.Network.APIServerPort = portOf(p.cp.Host())
	}
	return writeState(p.opts.StateDir, st)
}

// pushSandbox pushes the pause binary as the sandbox image, and says its
// reference; with machine pools also as the upstream sandbox image the
// machine image's containerd names, which every machine pulls through the
// cluster's registry.
func (p *Provider) pushSandbox(ctx context.Context, reg *realnode.Registry, pause string) (string, error) {
	sandbox, err := reg.PushBinary(ctx, pauseRepo, pauseTag, pause)
	if err != nil {
		return "", fmt.Errorf("sandbox image: %w", err)
	}
	if len(p.opts.MachinePools) == 0 {
		return sandbox, nil
	}
	t, err := name.NewTag(machineSandboxImage)
	if err != nil {
		return "", err
	}
	if _, err := reg.PushBinary(ctx, t.RepositoryStr(), t.TagStr(), pause); err != nil {
		return "", fmt.Errorf("sandbox image %s: %w", machineSandboxImage, err)
	}
	return sandbox, nil
}

// pushImages pushes the built-in images that are built, and the on-demand
// images the model runs that are not built: this kubeplug. It says which
// built-in images are missing.
func (p *Provider) pushImages(ctx context.Context, reg *realnode.Registry) error {
	imagesDir, err := p.imagesDir()
	if err != nil {
		return err
	}
	missing, err := reg.PushBuiltins(ctx, imagesDir)
	if err != nil {
		return err
	}
	for _, img := range p.onDemand {
		if img.Binary == filepath.Join(imagesDir, img.BuiltinImage.Binary) {
			continue // pushed above
		}
		t, err := name.NewTag(img.Image)
		if err != nil {
			return err
		}
		p.event("registry", "", "image "+img.Image+" ("+img.By+"): pushing this kubeplug, "+img.Binary)
		if _, err := reg.PushBinary(ctx, t.RepositoryStr(), t.TagStr(), img.Binary); err != nil {
			return fmt.Errorf("image %s: %w", img.Image, err)
		}
	}
	if len(missing) > 0 {
		p.event("registry", "", fmt.Sprintf("built-in images not built (make images), so not in the registry: %s", strings.Join(missing, ", ")))
	}
	return nil
}

// ensureAPIEndpoint points the kubernetes Service at the gateway, where Pods on
// real nodes reach the API server (the control plane runs without an endpoint
// reconciler: its address, 127.0.0.1, means nothing inside a Pod).
func (p *Provider) ensureAPIEndpoint(ctx context.Context, network realnode.Network) error {
	client, err := kubernetes.NewForConfig(p.cp.RESTConfig())
	if err != nil {
		return err
	}
	port := int32(realnode.GatewayAPIPort)
	name, proto := "https", corev1.ProtocolTCP
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault, Labels: map[string]string{
			discoveryv1.LabelServiceName: "kubernetes",
			discoveryv1.LabelManagedBy:   "kubeplug.dev-local-provider",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{network.Gateway().String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	slices := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	cur, err := slices.Get(ctx, slice.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = slices.Create(ctx, slice, metav1.CreateOptions{})
	case err == nil:
		slice.ResourceVersion = cur.ResourceVersion
		_, err = slices.Update(ctx, slice, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("endpoint of the kubernetes Service: %w", err)
	}
	return nil
}

// clusterNode is the realnode.Node of a desired real node or machine with
// ordinal index in the cluster's node network, its files in dir (below its
// machine directory).
func (p *Provider) clusterNode(rc *realCluster, n *desiredNode, index int, dir string) *realnode.Node {
	return &realnode.Node{
		Name:         n.name,
		Index:        index,
		Dir:          filepath.Join(p.machineDir(n.name), dir),
		Network:      rc.network,
		Bins:         rc.bins,
		PKIDir:       filepath.Join(p.machineRoot(ControlPlaneNode), "etc", "kubernetes", "pki"),
		ClusterCIDR:  rc.clusterCIDR,
		ClusterDNS:   rc.clusterDNS,
		Registry:     rc.registry.Addr(),
		SandboxImage: rc.sandbox,
	}
}

// realNode is the realnode.Node of a desired real node: its kubelet gets the
// model's flags (a machine's come from its rendered files instead).
func (p *Provider) realNode(rc *realCluster, n *desiredNode, index int) *realnode.Node {
	node := p.clusterNode(rc, n, index, realNodeDir)
	if n.spec != nil {
		for _, k := range slices.Sorted(maps.Keys(n.spec.Kubelet.Flags)) {
			if kubeletFlagsOwned[k] {
				p.event("node", n.name, "kubelet flag --"+k+" of "+n.spec.Kubelet.Flags[k].By+" left out: kubeplug sets it for a real node")
				continue
			}
			node.KubeletArgs = append(node.KubeletArgs, "--"+k+"="+n.spec.Kubelet.Flags[k].Value)
		}
		var gates []string
		for _, k := range slices.Sorted(maps.Keys(n.spec.Kubelet.FeatureGates)) {
			gates = append(gates, k+"="+strconv.FormatBool(n.spec.Kubelet.FeatureGates[k].Value))
		}
		if len(gates) > 0 {
			node.KubeletArgs = append(node.KubeletArgs, "--feature-gates="+strings.Join(gates, ","))
		}
	}
	return node
}

// joinReal starts a real node's programs, waits for its kubelet to register the
// Node, then sets the pool's labels and taints on it (the kubelet may not set
// most of them itself, under NodeRestriction).
func (p *Provider) joinReal(ctx context.Context, node *realnode.Node, opts controlplane.NodeOptions) (created bool, err error) {
	client, err := kubernetes.NewForConfig(p.cp.RESTConfig())
	if err != nil {
		return false, err
	}
	_, getErr := client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	created = apierrors.IsNotFound(getErr)
	if err := node.Start(ctx); err != nil {
		return false, err
	}
	if err := waitRegistered(ctx, client, node.Name); err != nil {
		if errors.Is(err, errNotRegistered) {
			return false, fmt.Errorf("%w (log: %s)", err, filepath.Join(node.Dir, "logs", "kubelet.log"))
		}
		return false, err
	}
	if _, err := p.cp.EnsureNode(ctx, node.Name, opts); err != nil {
		return false, err
	}
	return created, nil
}

// registerTimeout is how long a real node's or machine's kubelet has to
// register its Node once its programs run.
const registerTimeout = 2 * time.Minute

// errNotRegistered is a kubelet that did not register its Node in time.
var errNotRegistered = fmt.Errorf("the kubelet did not register the Node within %s", registerTimeout)

// waitRegistered waits until the Node name exists, for registerTimeout at
// most (then an error wrapping errNotRegistered).
func waitRegistered(ctx context.Context, client kubernetes.Interface, name string) error {
	deadline := time.Now().Add(registerTimeout)
	for {
		if _, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return errNotRegistered
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// realIndexes gives every real node an ordinal: the one it had, else the
// lowest free one.
func realIndexes(prev []nodeState, nodes []string) map[string]int {
	out := map[string]int{}
	used := map[int]bool{}
	for _, ns := range prev {
		if ns.Real && slices.Contains(nodes, ns.Name) {
			out[ns.Name] = ns.RealIndex
			used[ns.RealIndex] = true
		}
	}
	next := 0
	for _, n := range nodes {
		if _, ok := out[n]; ok {
			continue
		}
		for used[next] {
			next++
		}
		out[n] = next
		used[next] = true
	}
	return out
}

// stopReal stops the recorded real nodes that keep does not name.
func (p *Provider) stopReal(ctx context.Context, st *state, keep map[string]bool) error {
	if st.Network == nil {
		return nil
	}
	var errs []error
	for _, ns := range st.Nodes {
		if !ns.Real || keep[ns.Name] {
			continue
		}
		if ns.Machine {
			p.event("node", ns.Name, "stopping machine "+ns.Name)
			if err := p.recordedMachine(ns, *st.Network).Stop(ctx, 20*time.Second); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		node := &realnode.Node{Name: ns.Name, Index: ns.RealIndex, Dir: filepath.Join(p.machineDir(ns.Name), realNodeDir), Network: *st.Network}
		p.event("node", ns.Name, "stopping real node "+ns.Name)
		if err := node.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// teardownReal stops every real node, the registry and the node network.
func (p *Provider) teardownReal(ctx context.Context, st *state) error {
	if st == nil || st.Network == nil {
		return nil
	}
	err := p.stopReal(ctx, st, nil)
	if lb := st.LoadBalancer; lb != nil {
		p.event("node", lb.Name, "stopping machine "+lb.Name)
		err = errors.Join(err, p.recordedMachine(*lb, *st.Network).Stop(ctx, 20*time.Second))
	}
	reg := &realnode.Registry{Dir: filepath.Join(p.opts.StateDir, registryDir), Network: *st.Network}
	if _, dir, berr := p.nodeBins(); berr == nil {
		reg.Bin = filepath.Join(dir, "kubeplug-registry")
	}
	return errors.Join(err, reg.Stop(ctx), st.Network.Teardown(ctx))
}

// nthIP is the n-th address of cidr.
func nthIP(cidr string, n int) (string, error) {
	_, ipn, err := net.ParseCIDR(cidr)
	if err != nil {
		return "", err
	}
	ip := ipn.IP.To4()
	if ip == nil {
		return "", fmt.Errorf("%s: not IPv4", cidr)
	}
	v := uint32(ip[0])<<24 | uint32(ip[1])<<16 | uint32(ip[2])<<8 | uint32(ip[3])
	v += uint32(n)
	return net.IPv4(byte(v>>24), byte(v>>16), byte(v>>8), byte(v)).String(), nil
}

var _ provider.ImageLoader = (*Provider)(nil)

// LoadImage implements provider.ImageLoader: the images go into the cluster's
// registry, from which every real node pulls any image name.
func (p *Provider) LoadImage(ctx context.Context, path string) ([]string, error) {
	st, err := readState(p.opts.StateDir)
	if err != nil {
		return nil, err
	}
	if st == nil || st.Network == nil {
		return nil, fmt.Errorf("cluster %s (state dir %s) has no real nodes, and simulated nodes pull no images: name a pool in spec.provider.local.realPools and run kubeplug up", p.opts.ClusterName, p.opts.StateDir)
	}
	reg := &realnode.Registry{Dir: filepath.Join(p.opts.StateDir, registryDir), Network: *st.Network, Progress: p.pushEvent}
	return reg.Load(ctx, path)
}

// pushEvent tells the user how an image push into the cluster's registry goes.
func (p *Provider) pushEvent(e realnode.PushProgress) {
	ev := provider.Event{Time: time.Now(), Step: "image", Item: e.Image, Done: e.Done, Complete: e.Complete, Total: e.Total}
	switch {
	case e.Done && e.Err != nil:
		ev.Message = "push of " + e.Image + " failed: " + e.Err.Error()
	case e.Done:
		ev.Message = "pushed " + e.Image
	case e.Total > 0:
		ev.Message = fmt.Sprintf("pushing %s: %d of %d bytes", e.Image, e.Complete, e.Total)
	default:
		ev.Message = "pushing " + e.Image
	}
	p.opts.Events(ev)
}
