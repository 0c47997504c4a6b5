// Package realnode runs real Kubernetes nodes on this machine for the local
// provider: per node a containerd (built from its Go module, ./localnode), runc,
// the CNI bridge plugins, a kubelet and a kube-proxy (from the localcluster
// binary), each node in a network namespace of its own joined by a veth pair to
// a bridge that the cluster owns.
//
// # What it touches, and how it is undone
//
// Everything a node creates is named after the cluster's ID (a hash of its state
// directory) so that two clusters, or a cluster and the host, never share one:
//
//	bridge        kp<ID>, with the cluster's node subnet's gateway address
//	veth          kp<ID>n<I> on the bridge; eth0 inside the node's namespace
//	netns         /run/netns/kp<ID>-<node>
//	nat chain     KP-<ID>, jumped to from PREROUTING for packets from the bridge:
//	              the nodes reach the API server (on 127.0.0.1) at the
//	              gateway, DNAT'ed to loopback (route_localnet on the bridge only)
//	cgroups       /kubeplug/<ID>/<node> in every v1 hierarchy: the node's own
//	              processes (containerd, its shims, kubelet, kube-proxy) in
//	              .../system, the Pods below .../kubepods (the kubelet's cgroupRoot)
//	directories   <state>/machines/<node>/node (containerd's root, the kubelet's
//	              root, configuration, logs) and /run/kubeplug/<ID>/<node>
//	              (sockets: a Unix socket path must stay short)
//
// Stop kills every process in the node's cgroups (which holds the shims and the
// containers too, whatever they forked), unmounts what is mounted below the
// node's directories, removes the cgroups, the namespace and the veth; Teardown
// removes the bridge and the nat chain once no node is left. Both are idempotent
// and work from the names alone, so a `down` after a crash of the whole `up`
// cleans up what the state records.
//
// # cgroup v1
//
// This machine mounts cgroup v1 controllers (with an empty unified hierarchy).
// Kubernetes 1.35+ kubelets refuse v1 unless told; the kubelet configuration
// sets failCgroupV1: false and the cgroupfs driver, deliberately: it is what the
// kernel here offers, and a node that runs beats one that refuses.
package realnode
