package local

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/nodeagent"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/bootstraptoken"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/clusterpki"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/podnet"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// MachineImageEnv overrides where the machine image is (make machine-image).
const MachineImageEnv = "KUBEPLUG_MACHINE_IMAGE"

// machineSandboxImage is the sandbox image the machine image's containerd
// names (images/machine/files/etc/containerd/config.toml).
const machineSandboxImage = "registry.k8s.io/pause:3.10"

// machinePool says whether pool's nodes are systemd machines.
func (p *Provider) machinePool(pool string) bool { return slices.Contains(p.opts.MachinePools, pool) }

// machineImageDir finds the machine image: Options.MachineImageDir,
// $KUBEPLUG_MACHINE_IMAGE, else _output/machine beside the real nodes' programs.
func (p *Provider) machineImageDir() (string, error) {
	if p.opts.MachineImageDir != "" {
		return p.opts.MachineImageDir, nil
	}
	if d := os.Getenv(MachineImageEnv); d != "" {
		return d, nil
	}
	_, dir, err := p.nodeBins()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(filepath.Dir(dir)), "machine"), nil
}

// DeploysFiles implements provider.FileDeployer: a cluster with machine pools
// boots them from the rendered files themselves.
func (p *Provider) DeploysFiles() bool { return len(p.opts.MachinePools) > 0 }

// userData is the pool's rendered cloud-init file, byte for byte.
func userData(d *provider.Desired, pool string) ([]byte, error) {
	name := "nodes/" + pool + "/cloud-init.yaml"
	b, ok := d.Files[name]
	if !ok {
		return nil, fmt.Errorf("pool %s: no rendered %s to boot its machines from", pool, name)
	}
	return b, nil
}

// bootstrapGroup is the group of the cluster's bootstrap tokens: the RBAC below
// lets it create node-client CSRs, which the controller manager approves.
const bootstrapGroup = "system:bootstrappers:kubeplug:machines"

// ensureBootstrap makes a bootstrap token for the machines this Up starts
// (valid for an hour: it only serves their kubelets' first TLS bootstrap;
// renewals use the node's own certificate) and the RBAC that lets it and
// the nodes' certificates get client certificates approved, as kubeadm does.
func (p *Provider) ensureBootstrap(ctx context.Context) (string, error) {
	token, err := bootstraptoken.New()
	if err != nil {
		return "", err
	}
	return token, p.storeBootstrap(ctx, token)
}

// storeBootstrap stores token as the machines' bootstrap token, with the RBAC
// that lets its kubelets and the nodes' certificates get client certificates.
func (p *Provider) storeBootstrap(ctx context.Context, token string) error {
	client, err := kubernetes.NewForConfig(p.cp.RESTConfig())
	if err != nil {
		return err
	}
	return bootstraptoken.Store(ctx, client, bootstraptoken.Token{Token: token, Group: bootstrapGroup, Owner: "machines", TTL: time.Hour})
}

// machineFor is the realnode.Machine of a desired node of a machine pool.
func (p *Provider) machineFor(rc *realCluster, n *desiredNode, index int, ud []byte) (*realnode.Machine, error) {
	dir, err := p.machineImageDir()
	if err != nil {
		return nil, err
	}
	img, err := realnode.LoadImage(dir)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(ud)
	return &realnode.Machine{Node: p.clusterNode(rc, n, index, machineNodeDir), Image: img, UserData: ud,
		InstanceID: n.name + "-" + hex.EncodeToString(sum[:6]), Runc: rc.bins.Runc, Programs: p.machinePrograms()}, nil
}

// machinePrograms is the kubeplug-localcluster binary of the cluster's
// Kubernetes version (its kubelet and kube-proxy), which machines run instead
// of the image's: a cluster of 1.36 has kubelets of 1.36, and an upgrade's new
// machines those of the new version. Empty when the version's binaries are
// not resolved: the image's.
func (p *Provider) machinePrograms() string {
	if p.binDir == "" {
		return ""
	}
	prog, err := filepath.EvalSymlinks(filepath.Join(p.binDir, "kubelet"))
	if err != nil {
		return ""
	}
	return prog
}

// The directories of a node's files below its machine directory: a real
// node's, a machine's.
const realNodeDir, machineNodeDir = "node", "machine"

// recordedMachine is the machine of a node the state records, for what needs
// only its names (stop, a phase run in it).
func (p *Provider) recordedMachine(ns nodeState, network realnode.Network) *realnode.Machine {
	return &realnode.Machine{Node: &realnode.Node{Name: ns.Name, Index: ns.RealIndex,
		Dir: filepath.Join(p.machineDir(ns.Name), machineNodeDir), Network: network}}
}

// instanceIDFile records the instance of a node's machine (its user data's
// digest in the instance ID).
func (p *Provider) instanceIDFile(node string) string {
	return filepath.Join(p.machineDir(node), "instance-id")
}

// vendorData is the provider's own part of a machine's boot, in the paths the
// rendered kubelet drop-in names (render.Kubelet*Path): what a cloud gives a
// machine besides its user data. It holds the cluster's CA, a bootstrap token
// and kube-proxy's identity, so it lives only in the machine's seed, in the
// state directory (0600), never in rendered output.
func (p *Provider) vendorData(m *realnode.Machine, rc *realCluster, token string, extra ...vendorFile) ([]byte, error) {
	n := m.Node
	ca, err := bounded.ReadFile(clusterpki.CACertPath(n.PKIDir), 1<<20)
	if err != nil {
		return nil, err
	}
	pki := filepath.Join(filepath.Dir(n.Dir), "pki")
	proxyCert, proxyKey := filepath.Join(pki, "kube-proxy.crt"), filepath.Join(pki, "kube-proxy.key")
	if err := clusterpki.IssueClientCert(n.PKIDir, proxyCert, proxyKey, "system:kube-proxy"); err != nil {
		return nil, err
	}
	cert, err := bounded.ReadFile(proxyCert, 1<<20)
	if err != nil {
		return nil, err
	}
	key, err := bounded.ReadFile(proxyKey, 1<<20)
	if err != nil {
		return nil, err
	}
	server := p.apiServerURL(rc)
	kubeconfig := func(user map[string]string) string {
		b, _ := yaml.Marshal(map[string]any{
			"apiVersion": "v1", "kind": "Config",
			// The API server's certificate names localhost, not the gateway,
			// which forwards to it (a control-plane machine's names its address
			// too).
			"clusters":        []any{map[string]any{"name": "local", "cluster": map[string]string{"server": server, "certificate-authority": "/etc/kubernetes/pki/ca.crt", "tls-server-name": "localhost"}}},
			"users":           []any{map[string]any{"name": "node", "user": user}},
			"contexts":        []any{map[string]any{"name": "local", "context": map[string]string{"cluster": "local", "user": "node"}}},
			"current-context": "local",
		})
		return string(b)
	}
	podCIDR := podnet.PodCIDR(rc.clusterCIDR, n.Index)
	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This kernel mounts cgroup v1; Kubernetes 1.35+ refuses it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: /etc/kubernetes/pki/ca.crt}
authorization: {mode: Webhook}
clusterDNS: [%q]
clusterDomain: cluster.local
podCIDR: %q
rotateCertificates: true
staticPodPath: %s
failSwapOn: false
# The host's disk is shared with everything else on it: don't evict for it.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
`, rc.clusterDNS, podCIDR, render.StaticPodDir)
	cni := podnet.MachineCNIConfig(podCIDR)
	proxy := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: %q
clientConnection: {kubeconfig: /var/lib/kube-proxy/kubeconfig}
conntrack: {maxPerCore: 0}
`, rc.clusterCIDR)
	reg := rc.registry.Addr()
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	files := []vendorFile{
		{"/etc/kubernetes/pki/ca.crt", "0644", string(ca)},
		{render.KubeletConfigPath, "0644", kubelet},
		{render.KubeletProviderEnvPath, "0644", "KUBELET_PROVIDER_ARGS=--node-ip=" + rc.network.NodeIP(n.Index).String() + " --hostname-override=" + n.Name + "\n"},
		{"/etc/cni/net.d/10-kubeplug.conflist", "0644", cni},
		{"/etc/containerd/certs.d/_default/hosts.toml", "0644", fmt.Sprintf("[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+reg)},
		{"/etc/containerd/certs.d/" + reg + "/hosts.toml", "0644", fmt.Sprintf("server = %q\n", "http://"+reg)},
		{"/var/lib/kube-proxy/kubeconfig", "0600", kubeconfig(map[string]string{"client-certificate-data": b64(cert), "client-key-data": b64(key)})},
		{"/var/lib/kube-proxy/config.yaml", "0644", proxy},
	}
	if token != "" {
		files = append(files, vendorFile{render.KubeletBootstrapKubeconfigPath, "0600", kubeconfig(map[string]string{"token": token})})
	}
	files = append(files, extra...)
	// A script, not a cloud-config: cloud-init lets the user data's keys
	// replace the vendor data's (its write_files would drop these). Vendor
	// scripts run once per instance in the final stage, before the user
	// data's runcmd (which starts the node agent, and so the kubelet).
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# kubeplug local provider: the machine's identity and the cluster's endpoints.\nset -eu\n")
	b.WriteString("w() { mkdir -p \"$(dirname \"$1\")\"; printf %s \"$3\" | base64 -d > \"$1.tmp\"; chmod \"$2\" \"$1.tmp\"; mv \"$1.tmp\" \"$1\"; }\n")
	for _, f := range files {
		fmt.Fprintf(&b, "w %s %s %s\n", f.path, f.mode, b64([]byte(f.content)))
	}
	b.WriteString("systemctl --no-block restart kube-proxy.service\n")
	return []byte(b.String()), nil
}

// vendorFile is a file a machine's vendor data writes.
type vendorFile struct{ path, mode, content string }

// apiServerURL is where the machines reach the API server: the control-plane
// machine, else the gateway, which forwards to this host's API server.
func (p *Provider) apiServerURL(rc *realCluster) string {
	if p.cpMachine() {
		if p.haCount > 1 {
			return "https://" + rc.network.NodeIP(haLBIndex).String() + ":" + strconv.Itoa(machineAPIServerPort)
		}
		return "https://" + rc.network.NodeIP(cpMachineIndex).String() + ":" + strconv.Itoa(machineAPIServerPort)
	}
	return "https://" + rc.network.Gateway().String() + ":" + strconv.Itoa(realnode.GatewayAPIPort)
}

// upMachine boots a machine-pool node from its pool's rendered files and waits
// until its kubelet registered the Node; the hooks ran inside the machine, and
// their reports are read from it. A machine whose user data changed is
// replaced: a new instance, so its per-instance steps run again.
func (p *Provider) upMachine(ctx context.Context, n *desiredNode, rc *realCluster, token string, status *provider.NodeStatus) (created bool, err error) {
	m := n.sys
	client, err := kubernetes.NewForConfig(p.cp.RESTConfig())
	if err != nil {
		return false, err
	}
	_, getErr := client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	created = apierrors.IsNotFound(getErr)
	if p.replacing(n) {
		if err := p.replaceMachine(ctx, client, n, created); err != nil {
			return false, err
		}
		created = true
	}
	if !m.Running(ctx) {
		if err := p.bootMachine(ctx, n, rc, token); err != nil {
			return false, err
		}
	}
	if err := m.WaitBooted(ctx, 3*time.Minute); err != nil {
		return false, p.bootFailed(ctx, n, err, status)
	}
	sum, err := p.machinePhase(ctx, n, hookspec.PhaseBeforeNodeup, "")
	status.Hooks[hookspec.PhaseBeforeNodeup] = sum
	if err != nil {
		return false, err
	}
	if err := waitRegistered(ctx, client, n.name); err != nil {
		if errors.Is(err, errNotRegistered) {
			return false, fmt.Errorf("machine %s: %w; kubelet's journal:\n%s", n.name, err, m.Journal(ctx, "kubelet.service", 20))
		}
		return false, err
	}
	return created, nil
}

// replaceMachine removes machine n, whose pool's boot files changed, and its
// Node, drained first unless the Node is not there (created), as kops'
// rolling update does: cordon, drain, a new machine from the new files; the
// caller holds the roll lock until it is Ready.
func (p *Provider) replaceMachine(ctx context.Context, client kubernetes.Interface, n *desiredNode, created bool) error {
	p.event("node", n.name, "machine "+n.name+": its pool's boot files changed, replacing it")
	if !created {
		if err := provider.Drain(ctx, client, n.name, 3*time.Minute); err != nil {
			return fmt.Errorf("machine %s: drain before replacing it: %w", n.name, err)
		}
	}
	if err := n.sys.Remove(ctx); err != nil {
		return err
	}
	return p.cp.DeleteNode(ctx, n.name)
}

// bootMachine starts machine n with its vendor data (the cluster's files, the
// bootstrap token, its plugins' key pairs) and records its instance ID.
func (p *Provider) bootMachine(ctx context.Context, n *desiredNode, rc *realCluster, token string) error {
	m := n.sys
	if token == "" {
		return fmt.Errorf("machine %s: no bootstrap token to boot it with", n.name)
	}
	kp, err := p.keyPairFiles(m.Node.PKIDir, n)
	if err != nil {
		return fmt.Errorf("machine %s: %w", n.name, err)
	}
	vd, err := p.vendorData(m, rc, token, kp...)
	if err != nil {
		return fmt.Errorf("machine %s: %w", n.name, err)
	}
	m.VendorData = vd
	p.nodeEvent(n.name, n.name, "machine "+n.name+" booting", false)
	if err := m.Start(ctx); err != nil {
		return err
	}
	return os.WriteFile(p.instanceIDFile(n.name), []byte(m.InstanceID), 0o644)
}

// bootFailed is the error of machine n's boot that failed with err: one that
// failed on an enforced hook names it, from the machine's own report, which
// goes to status.
func (p *Provider) bootFailed(ctx context.Context, n *desiredNode, err error, status *provider.NodeStatus) error {
	var be *realnode.BootError
	if !errors.As(err, &be) {
		return err
	}
	rep, rerr := readReport(ctx, n.sys, hookspec.PhaseBeforeNodeup)
	if rerr != nil || !rep.Failed {
		return err
	}
	sum, herr := p.summarize(ctx, &desiredNode{name: n.name}, hookspec.PhaseBeforeNodeup, rep, nil)
	status.Hooks[hookspec.PhaseBeforeNodeup] = sum
	if herr != nil {
		return fmt.Errorf("machine %s: %w\njournal of %s:\n%s", n.name, herr, n.name, be.Journal)
	}
	return err
}

var errBadReport = errors.New("unreadable report")

// readReport reads the report of a phase from inside the machine; an error
// wrapping errBadReport is a report that is there but not JSON.
func readReport(ctx context.Context, m *realnode.Machine, phase string) (*nodeagent.Report, error) {
	file := path.Join(nodeagent.ReportsDir, phase+".json")
	out, err := m.Exec(ctx, "cat", file)
	if err != nil {
		return nil, err
	}
	rep := &nodeagent.Report{}
	if err := json.Unmarshal([]byte(out), rep); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", file, errBadReport, err)
	}
	return rep, nil
}

// replacing says whether the node's machine runs an older instance (its
// pool's boot files changed since it was made).
func (p *Provider) replacing(n *desiredNode) bool {
	have, err := os.ReadFile(p.instanceIDFile(n.name)) //nolint:gosec // inside the state dir
	return err == nil && string(have) != n.sys.InstanceID
}

// machinePhase reads the report of a phase the machine's node agent ran
// (kubeplug-boot.service runs beforeNodeup and afterNodeup) and summarises it
// as runPhase does; with a unit, it first starts that unit and waits for it.
func (p *Provider) machinePhase(ctx context.Context, n *desiredNode, phase, unit string) (provider.HookSummary, error) {
	m := n.sys
	if unit != "" {
		if _, err := m.Exec(ctx, "systemctl", "start", unit); err != nil {
			p.event("hooks", n.name, fmt.Sprintf("%s: %v", unit, err))
		}
	}
	var rep *nodeagent.Report
	deadline := time.Now().Add(5 * time.Minute)
	for {
		r, err := readReport(ctx, m, phase)
		if err == nil {
			rep = r
			break
		}
		if errors.Is(err, errBadReport) {
			return provider.HookSummary{}, fmt.Errorf("machine %s: %w", n.name, err)
		}
		if failed, _ := m.Exec(ctx, "cat", hookspec.FailedMarkerPath); failed != "" && phase != hookspec.PhaseBeforeNodeup {
			return provider.HookSummary{}, fmt.Errorf("machine %s: the node failed before %s: %s", n.name, phase, strings.TrimSpace(failed))
		}
		if time.Now().After(deadline) {
			return provider.HookSummary{}, fmt.Errorf("machine %s: no report of %s within 5m; kubeplug-boot's journal:\n%s", n.name, phase, m.Journal(ctx, "kubeplug-boot.service", 20))
		}
		select {
		case <-ctx.Done():
			return provider.HookSummary{}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	var runErr error
	if rep.Error != "" {
		runErr = errors.New(rep.Error)
	}
	return p.summarize(ctx, &desiredNode{name: n.name}, phase, rep, runErr)
}
