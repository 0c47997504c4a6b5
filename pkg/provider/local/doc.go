// Package local is kubeplug's default provider: a cluster on this machine, made
// of a real Kubernetes control plane on loopback (pkg/provider/local/controlplane) and
// simulated kubelets (kwok), with one directory per node standing for the
// machine where the node agent runs the plugins' hooks.
//
// # The state directory
//
// Everything of a cluster lives under one directory (DefaultStateDir, or
// Options.StateDir), and nothing outside it is written or removed:
//
//	provider.json                   the nodes of the last Up; marks the directory as kubeplug's
//	controlplane/                   etcd data, the cluster-admin kubeconfig, logs/, state.json (pids, ports, command lines)
//	machines/<node>/root/           the node's "/": its rendered files, unit files, hook scripts, the agent's reports and state;
//	                                on control-plane-0 also etc/kubernetes/pki and etc/kubernetes/admin.conf
//	machines/<node>/files.json      the files written under root, so files a new render drops are removed
//
// The control plane runs detached: its processes outlive `kubeplug up`, and a
// later Up, Down or Running finds them through controlplane/state.json. The API
// server keeps the port it got at creation (or spec.provider.local.apiServerPort)
// across down and up, and the certificates are reused, so a kubeconfig stays
// valid. A state directory of another StateVersion is refused with an error
// wrapping provider.ErrIncompatibleState that says to run `kubeplug down --purge`.
//
// # Kubernetes version
//
// The provider runs the Kubernetes versions internal/k8sversions/versions.yaml
// names (KubernetesVersions), each from binaries of exactly that version. Up
// refuses any other spec.kubernetesVersion, a different patch release included,
// with an error wrapping provider.ErrUnsupportedVersion that lists the supported
// versions, and a supported one whose binaries are not at hand with an error
// wrapping controlplane.ErrBinariesNotFound that says which version the binaries
// at hand are, before it writes or starts anything: the rendered files name the
// file's version, so running another would make them untrue. Up of a running
// cluster with a higher version upgrades it in place (control plane components
// one at a time in controlplane.UpgradeOrder, then nodes); a lower one, or one
// that skips a minor, is refused. On three control-plane machines the upgrade
// replaces the machines one at a time, control plane first (cpupgrade.go);
// one control-plane machine is not upgraded in place. Machines run the
// kubelet and kube-proxy of the cluster's version. See docs/versions.md and
// docs/ha.md.
//
// # Control-plane flags
//
// The provider adds no flag of its own: kube-apiserver, kube-controller-manager
// and kube-scheduler run exactly the commands of the static Pods rendered on
// the control-plane machine (render.StaticPodDir), which the built-in
// control-plane plugin and every other plugin contributed through the model. The
// provider only supplies facts about the machine (Facts): the loopback address,
// the components' ports (those of the running cluster, else the ones it had,
// else free ones), the etcd servers, and where the certificates
// (/etc/kubernetes/pki) and the components' kubeconfig
// (/etc/kubernetes/admin.conf) are on the machine. `kubeplug up` passes them as
// the control-plane plugin's "machine" value before anything resolves, so the
// static Pods it renders are the command lines that run; Up refuses static Pods
// rendered for other ports. etcd and kwok (the simulated kubelets) are not
// control-plane components of the model: the provider configures them itself,
// kwok with the static Pods' --cluster-cidr. The API server's certificate,
// made when the cluster is created, names the first address of their
// --service-cluster-ip-range (the "kubernetes" Service).
// A flag that changed restarts only its component, on the same port with the
// same certificates.
//
// With the control-plane pool in Options.MachinePools the control plane runs
// on a systemd machine instead (cpmachine.go): the facts are that machine's
// (its node-network address, kubeadm's ports), the static Pods run under its
// kubelet from images of the cluster's own programs pushed to the cluster's
// registry, and the PKI, the components' kubeconfig and the kubelet's
// kubeconfig reach it as vendor data. What follows about flags rewritten into
// the root applies to the processes only.
//
// The control-plane pool's rendered files are written under
// machines/control-plane-0/root, and so are the certificates, keys and the
// components' kubeconfig (they never appear in rendered files, only their
// paths). A flag value that is a clean absolute path (no ',', '=' or space) is a
// path on the control-plane machine: when it lies under a volume's mountPath it
// is first mapped to the volume's hostPath (the longest mountPath wins), and the
// result is rewritten to the same path under that root. That is the one
// difference between a static Pod's command and the process's arguments. So
// --tls-cert-file=/etc/kubernetes/pki/apiserver.crt reads the provider's
// certificate, --audit-policy-file=/etc/kubernetes/audit/policy.yaml reads the
// policy a plugin contributed as a node file, and
// --audit-log-path=/var/log/kubernetes/audit.log writes under the root. The
// volumes' host directories and the parent directory of every rewritten path
// are created. Paths inside files (a structured authentication config naming a
// CA file) are not rewritten.
//
// # Nodes
//
// Every pool other than the control plane gets count Nodes named <pool>-<i>,
// carrying the pool's kubelet labels, kubeplug.dev/pool=<pool> and the pool's
// taints. The control plane gets one Node, control-plane-0, labelled
// node-role.kubernetes.io/control-plane and tainted NoSchedule as kubeadm does,
// so that workloads behave as on a real cluster; its hooks run too (beforeNodeup
// before the control plane starts). For each node, Up writes the machine's files
// under its root, runs the node agent's beforeNodeup phase in-process, creates
// the Node (it joins) and waits for Ready, then runs afterNodeup; AfterDeploy
// runs afterDeploy on every node. A failed enforced hook keeps its node from
// joining and is an error naming node, plugin, hook and phase; a failed bypass
// hook is an event. Nodes of pools that shrank or vanished are deleted with
// their machine directories. The node agent records which hooks succeeded, so a
// second Up re-runs none unless its definition changed.
//
// # Real nodes
//
// The nodes of the pools named in Options.RealPools are real (package
// pkg/provider/local/realnode): the node's programs start in its own network namespace,
// the kubelet registers the Node, and Up then sets the pool's labels and taints
// on it as it does for simulated ones. The first real node creates what they
// share: the node network (a /24 in 10.250.0.0/16 clashing with no route of the
// host, recorded in provider.json), the cluster's registry with the sandbox
// image, and the kubernetes Service's endpoint at the network's gateway. A
// component whose flags or configuration changed restarts; one that died starts
// again. Preflight refuses a machine that cannot host them before anything
// starts. Down stops them all and removes the network, from provider.json.
package local
