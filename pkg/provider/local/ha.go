package local

import (
	"fmt"
	"net"
	"path"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/clusterpki"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// A highly available control plane on machines (spec.controlPlane.count 3):
// control-plane-0, -1 and -2 at the first three addresses of the node
// network, each running the control-plane pool's rendered static Pods with
// its own address, a stacked etcd member per machine (peers over TLS on the
// node network, each API server talking to its local member), and a load
// balancer in a machine of its own, control-plane-lb: HAProxy from Debian's
// packages (in the machine image), TCP passthrough to the API servers that
// answer /readyz. The cluster-admin kubeconfig, the kubelets and kube-proxy
// reach the API through it; the controller manager and the scheduler of a
// machine reach their own API server, and elect a leader.
//
// The pool's one rendered file names control-plane-0's address (the
// provider's facts); the provider's part of each machine's boot (its vendor
// data, which runs after the user data's files are written and before the
// kubelet starts) rewrites the static Pods for that machine: its address for
// control-plane-0's, its etcd member's name, the cluster's membership and
// peer TLS, leader election on — as kubeadm writes each control-plane node's
// own manifests when it joins.

// haLBIndex is the load balancer machine's ordinal in the node network (its
// address .129): out of the way of the nodes', which count up from .2, and
// the last whose Pod subnet (podnet.PodCIDR) is still an address.
const haLBIndex = 127

// haLBName is the load balancer machine's name.
const haLBName = model.ControlPlanePool + "-lb"

// haEtcdPKI is where the etcd peer PKI is on a control-plane machine.
const haEtcdPKI = factPKIDir + "/etcd"

// cpCount is the number of control-plane nodes the model asks for.
func cpCount(m *model.Model) int {
	if m == nil || m.Pools[model.ControlPlanePool] == nil || m.Pools[model.ControlPlanePool].Count < 1 {
		return 1
	}
	return m.Pools[model.ControlPlanePool].Count
}

// cpName is the name of the i-th control-plane node.
func cpName(i int) string { return model.ControlPlanePool + "-" + strconv.Itoa(i) }

// haMember is one control-plane machine's part in the stacked etcd.
type haMember struct {
	Index int
	IP    net.IP
}

// peerURL is the member's etcd peer URL.
func (m haMember) peerURL() string {
	return "https://" + net.JoinHostPort(m.IP.String(), strconv.Itoa(machineEtcdPeerPort))
}

// clientURL is the member's etcd client URL.
func (m haMember) clientURL() string {
	return "http://" + net.JoinHostPort(m.IP.String(), strconv.Itoa(machineEtcdClientPort))
}

// haMembers are the control-plane machines of a cluster of count on network.
func haMembers(network realnode.Network, count int) []haMember {
	out := make([]haMember, count)
	for i := range count {
		out[i] = haMember{Index: i, IP: network.NodeIP(i)}
	}
	return out
}

// initialCluster is etcd's --initial-cluster for members.
func initialCluster(members []haMember) string {
	var parts []string
	for _, m := range members {
		parts = append(parts, cpName(m.Index)+"="+m.peerURL())
	}
	return strings.Join(parts, ",")
}

// haEtcdFlags are the flags of member m's etcd beyond the rendered ones:
// its name, its peer URLs over TLS, the cluster's membership (initial, the
// --initial-cluster value) and state ("new" for a cluster's first boot,
// "existing" for a member added to a running cluster).
func haEtcdFlags(m haMember, clusterID, initial, state string) [][2]string {
	return [][2]string{
		{"name", cpName(m.Index)},
		{"listen-peer-urls", m.peerURL()},
		{"initial-advertise-peer-urls", m.peerURL()},
		{"initial-cluster", initial},
		{"initial-cluster-state", state},
		{"initial-cluster-token", "kubeplug-" + clusterID},
		{"peer-cert-file", path.Join(factPKIDir, clusterpki.EtcdPeerCert)},
		{"peer-key-file", path.Join(factPKIDir, clusterpki.EtcdPeerKey)},
		{"peer-trusted-ca-file", path.Join(factPKIDir, clusterpki.EtcdCACert)},
		{"peer-client-cert-auth", "true"},
		// The machines boot one after another: a member waits for the
		// others' quorum instead of exiting into the kubelet's back-off.
		{"start-timeout", "10m"},
	}
}

// setFlag sets --name=value in a command line, replacing an earlier value.
func setFlag(cmd []string, name, value string) []string {
	for i, a := range cmd {
		if strings.HasPrefix(a, "--"+name+"=") || a == "--"+name {
			cmd[i] = "--" + name + "=" + value
			return cmd
		}
	}
	return append(cmd, "--"+name+"="+value)
}

// haStaticPods rewrites the control-plane pool's rendered static Pods for
// member m of a stacked control plane whose rendered address is ip0, as
// files of its vendor data (written over the user data's).
func haStaticPods(mach *render.Machine, ip0 string, m haMember, clusterID, initial, state string) ([]vendorFile, error) {
	pods, err := staticPods(mach)
	if err != nil {
		return nil, err
	}
	// ip0 as a whole address: not the start of a longer one.
	addr := regexp.MustCompile(regexp.QuoteMeta(ip0) + `(\D|$)`)
	var out []vendorFile
	for _, sp := range pods {
		pod := sp.pod
		if len(pod.Spec.Containers) == 0 || len(pod.Spec.Containers[0].Command) == 0 {
			return nil, fmt.Errorf("static Pod %s: no command", sp.file)
		}
		c := &pod.Spec.Containers[0]
		for i, a := range c.Command {
			c.Command[i] = addr.ReplaceAllString(a, m.IP.String()+"$1")
		}
		switch path.Base(c.Command[0]) {
		case string(controlplane.Etcd):
			for _, f := range haEtcdFlags(m, clusterID, initial, state) {
				c.Command = setFlag(c.Command, f[0], f[1])
			}
			hostPath := corev1.HostPathDirectory
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "etcd-peer-pki",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: haEtcdPKI, Type: &hostPath}}})
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "etcd-peer-pki", MountPath: haEtcdPKI, ReadOnly: true})
		case string(controlplane.ControllerManager), string(controlplane.Scheduler):
			// Three of each: one active at a time.
			c.Command = setFlag(c.Command, "leader-elect", "true")
		}
		b, err := yaml.Marshal(&pod)
		if err != nil {
			return nil, fmt.Errorf("static Pod %s: %w", sp.file, err)
		}
		out = append(out, vendorFile{sp.file, "0600", string(b)})
	}
	return out, nil
}

// lbUserData is the load balancer machine's cloud-config: HAProxy in TCP
// mode in front of the API servers of members, each checked by its /readyz
// every second (two failures take it out, two successes bring it back). A
// server taken out has its connections closed (on-marked-down
// shutdown-sessions): a machine removed with its network answers nothing,
// not even a reset, and a client's HTTP/2 connection through HAProxy to it
// would otherwise hang until the client's own health check gives up on it
// (the likely cause of a 20.7 s gap in writes during TestHAUpgrade's roll,
// which removes machines; a killed one keeps its network and resets).
// The node programs of the machine image have nothing to do there.
func lbUserData(members []haMember) []byte {
	var b strings.Builder
	b.WriteString(`#cloud-config
# kubeplug local provider: the load balancer in front of the control plane's API servers.
write_files:
  - path: /etc/haproxy/haproxy.cfg
    permissions: "0644"
    content: |
      global
        maxconn 4096
      defaults
        mode tcp
        timeout connect 2s
        timeout client 1h
        timeout server 1h
        timeout check 2s
      frontend kube-apiserver
        bind *:` + strconv.Itoa(machineAPIServerPort) + `
        default_backend kube-apiservers
      backend kube-apiservers
        option httpchk GET /readyz
        http-check expect status 200
        default-server inter 1s fall 2 rise 2 check check-ssl verify none on-marked-down shutdown-sessions
`)
	for _, m := range members {
		fmt.Fprintf(&b, "        server %s %s\n", cpName(m.Index), net.JoinHostPort(m.IP.String(), strconv.Itoa(machineAPIServerPort)))
	}
	b.WriteString(`runcmd:
  - [systemctl, disable, --now, kube-proxy.service, containerd.service]
  - [systemctl, restart, haproxy.service]
`)
	return []byte(b.String())
}
