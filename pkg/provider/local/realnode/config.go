package realnode

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/kubeplug/kubeplug/pkg/provider/internal/clusterpki"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/podnet"
)

// writeConfig writes the node's identities and the configuration of its
// containerd, CNI, kubelet and kube-proxy.
func (n *Node) writeConfig() error {
	if err := n.issue(); err != nil {
		return err
	}
	ca := clusterpki.CACertPath(n.PKIDir)
	server := "https://" + n.Network.Gateway().String() + ":" + strconv.Itoa(GatewayAPIPort)
	kubeconfig := func(cert, key string) string {
		// The API server's certificate names localhost, not the gateway, which
		// forwards to it.
		return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: %q, certificate-authority: %q, tls-server-name: localhost}
users:
- name: node
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: local
  context: {cluster: local, user: node}
current-context: local
`, server, ca, cert, key)
	}
	podCIDR := podnet.PodCIDR(n.ClusterCIDR, n.Index)
	files := map[string]string{
		"kubelet.kubeconfig":    kubeconfig(n.path("pki", "kubelet-client.crt"), n.path("pki", "kubelet-client.key")),
		"kube-proxy.kubeconfig": kubeconfig(n.path("pki", "kube-proxy.crt"), n.path("pki", "kube-proxy.key")),
		"containerd.toml": fmt.Sprintf(`version = 3
root = %q
state = %q

[grpc]
  address = %q

[plugins."io.containerd.cri.v1.runtime"]
  # This machine's root may not lower OOM scores (no CAP_SYS_RESOURCE):
  # containers get at least containerd's own.
  restrict_oom_score_adj = true
  # Pod network namespaces are pinned below the run directory, not in the
  # host's /run/netns, so that stopping the node unmounts them.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%q]
    conf_dir = %q
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
      SystemdCgroup = false
      BinaryName = %q

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %q
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = %q
`, n.path("containerd", "root"), n.runDir()+"/containerd", n.socket(), n.Bins.CNI, n.path("cni", "net.d"), n.Bins.Runc,
			n.SandboxImage, n.path("certs.d")),
		// Every registry name is pulled through the cluster's registry.
		"certs.d/_default/hosts.toml":           fmt.Sprintf("[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+n.Registry),
		"certs.d/" + n.Registry + "/hosts.toml": fmt.Sprintf("server = %q\n", "http://"+n.Registry),
		"cni/net.d/10-kubeplug.conflist": fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kubeplug",
  "plugins": [
    {
      "type": "bridge", "bridge": "cbr0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, podCIDR, n.path("cni", "ipam")),
		"kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This kernel mounts cgroup v1; Kubernetes 1.35+ refuses it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %q
containerRuntimeEndpoint: %q
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
clusterDNS: [%q]
clusterDomain: cluster.local
podCIDR: %q
failSwapOn: false
resolvConf: /etc/resolv.conf
# The host's disk is shared with everything else on it: don't evict for it.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
# The node's own, not the host's /var/log/pods: every node of every cluster on
# this machine would share that one, and each kubelet removes the log
# directories of Pods it does not know (another node's) — kubectl logs then
# finds nothing — and leaves its own behind on the host.
podLogsDir: %q
`, n.CgroupParent(), "unix://"+n.socket(), ca, n.ClusterDNS, podCIDR, n.path("pod-logs")),
		"kube-proxy.yaml": fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: %q
clientConnection: {kubeconfig: %q}
# Leave the host-wide conntrack table size alone.
conntrack: {maxPerCore: 0}
metricsBindAddress: "127.0.0.1:10249"
healthzBindAddress: "127.0.0.1:10256"
`, n.ClusterCIDR, n.path("kube-proxy.kubeconfig")),
	}
	for name, content := range files {
		p := n.path(name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		// Unchanged files are not written again: kube-proxy exits when its
		// configuration file is written (it watches it), and the fingerprint of an
		// unchanged configuration would not restart it.
		if have, err := os.ReadFile(p); err == nil && string(have) == content {
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}
