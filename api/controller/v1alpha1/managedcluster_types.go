package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ManagedCluster is a cluster the controller creates and deletes: a kubeplug
// cluster file (cluster.yaml) brought up by the same code as `kubeplug up`,
// on a provider that can run from inside a cluster (hosts). Its kubeconfig is
// published in a Secret and as a TargetCluster of the same name, which
// installations target by name. Deleting it runs `kubeplug down` (a finalizer)
// unless DeletionPolicy is Retain.
//
// (It is not kind Cluster: the cluster file is already kubeplug.dev/v1alpha1
// Cluster, and a `kubectl apply` of a cluster file must not be taken for one.)
//
// +kubebuilder:object:root=true
type ManagedCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ManagedClusterSpec   `json:"spec"`
	Status ManagedClusterStatus `json:"status,omitempty"`
}

// ManagedClusterList is a list of ManagedClusters.
//
// +kubebuilder:object:root=true
type ManagedClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ManagedCluster `json:"items"`
}

// ManagedClusterSpec is the cluster to bring up. Exactly one of ClusterFile
// and ClusterFileFrom is set.
type ManagedClusterSpec struct {
	// ClusterFile is the cluster file (cluster.yaml: apiVersion, kind Cluster,
	// metadata, spec), inline as text.
	ClusterFile string `json:"clusterFile,omitempty" jsonschema:"maxLength=262144"`
	// ClusterFileFrom is a key of a ConfigMap, in the resource's namespace,
	// holding the cluster file.
	ClusterFileFrom *KeyRef `json:"clusterFileFrom,omitempty"`
	// SSHKeySecret is a Secret, in the resource's namespace, holding the
	// private key the hosts provider logs in with under Key (default
	// "ssh-privatekey", the key of a kubernetes.io/ssh-auth Secret). The
	// cluster file then sets no keyFile and no agent.
	SSHKeySecret *KeyRefOptionalKey `json:"sshKeySecret,omitempty"`
	// AcceptNewHostKeys trusts each host's key on first use (as `kubeplug up
	// --accept-new-host-keys`); the keys seen are kept with the cluster's
	// state, and a changed key is refused. Without it, the cluster file's
	// knownHostsFile must hold them.
	AcceptNewHostKeys bool `json:"acceptNewHostKeys,omitempty"`
	// DeletionPolicy says what deleting the resource does: Delete (the
	// default) runs `kubeplug down` on the cluster; Retain leaves it running.
	DeletionPolicy string `json:"deletionPolicy,omitempty" jsonschema:"enum=,enum=Delete,enum=Retain"`
	// Expansions are expansion packages pulled from OCI references, verified
	// against their keys (a ConfigMap of the resource's namespace) and merged
	// into every up of the cluster, as `kubeplug up --expansion-dir` merges
	// them: an expansion signed by no key of its ConfigMap is refused
	// (Stalled, reason ExpansionRefused) and up does not run.
	Expansions []ExpansionRef `json:"expansions,omitempty" jsonschema:"maxItems=8"`
	// SuspendExpansions runs up without spec.expansions.
	SuspendExpansions bool `json:"suspendExpansions,omitempty"`
	// ExpansionSite is the site registry and the allowlist the expansions
	// are merged with; the cluster file's own spec.expansions.allow is used
	// when this sets none (setting both is refused).
	ExpansionSite *ExpansionSite `json:"expansionSite,omitempty"`
}

// ManagedClusterStatus is what the controller last did with the cluster.
type ManagedClusterStatus struct {
	// ObservedGeneration is the generation the status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Provisioning is True while up runs; Ready is True when the
	// last up brought the whole cluster up; Failed is True, with the
	// provider's error naming the host and step, when it did not (the next
	// reconcile runs up again, which continues where it stopped). Stalled is
	// True, with Failed, when the provider refuses the file's
	// spec.kubernetesVersion (reason KubernetesVersionNotSupported): nothing
	// was touched, and up is not retried until the file changes.
	Conditions []metav1.Condition `json:"conditions,omitempty" jsonschema:"maxItems=8"`
	// KubeconfigSecret is the Secret holding the cluster's kubeconfig (key
	// "kubeconfig"); a TargetCluster of the resource's name points at it.
	KubeconfigSecret string `json:"kubeconfigSecret,omitempty" jsonschema:"maxLength=253"`
	// KubernetesVersion is the version the last up brought up.
	KubernetesVersion string `json:"kubernetesVersion,omitempty" jsonschema:"maxLength=64"`
	// AppliedDigest identifies what the last successful up brought up: the
	// cluster file, the SSH key Secret's version and AcceptNewHostKeys. Up
	// runs again only when it changes (or after a failure).
	AppliedDigest string `json:"appliedDigest,omitempty" jsonschema:"maxLength=80"`
	// Machines are the cluster's machines (hosts), each with the phase the
	// provider's progress last reported for it: the events `kubeplug up`'s
	// live display shows, not a query of the machines.
	Machines []MachineStatus `json:"machines,omitempty" jsonschema:"maxItems=1000"`
	// Expansions are the expansions the last successful up merged, with the
	// steps and checks they skipped or delegated: empty when it merged none.
	Expansions []AppliedExpansion `json:"expansions,omitempty" jsonschema:"maxItems=8"`
}

// The phases of a ManagedCluster's machine.
const (
	// MachinePending: listed, not yet worked on by this run (or waiting for
	// the next one).
	MachinePending = "Pending"
	// MachineProvisioning: connected to, checked, its files and images
	// delivered, or rolled to new ones.
	MachineProvisioning = "Provisioning"
	// MachineJoining: its kubelet (and on the control-plane host, the
	// control plane) started, its Node not Ready yet.
	MachineJoining = "Joining"
	// MachineReady: its Node is Ready.
	MachineReady = "Ready"
	// MachineFailed: the provider failed on it, at Step, with Message.
	MachineFailed = "Failed"
	// MachineDeleting: being cleaned (down, or removed from the file).
	MachineDeleting = "Deleting"
)

// MachineStatus is one machine of a ManagedCluster.
type MachineStatus struct {
	// Name is the machine's Node name (hosts: <pool>-<index>).
	Name string `json:"name" jsonschema:"maxLength=253"`
	// Pool is its node pool (control-plane for the control-plane host).
	Pool string `json:"pool,omitempty" jsonschema:"maxLength=63"`
	// Role is control-plane or worker.
	Role string `json:"role,omitempty" jsonschema:"maxLength=32"`
	// Address is where the provider reaches it (hosts: the host's address).
	Address string `json:"address,omitempty" jsonschema:"maxLength=253"`
	// Phase is Pending, Provisioning, Joining, Ready, Failed or Deleting.
	Phase string `json:"phase" jsonschema:"enum=Pending,enum=Provisioning,enum=Joining,enum=Ready,enum=Failed,enum=Deleting"`
	// Step is the last step the provider reported for it; when Failed, the
	// step it failed at.
	Step string `json:"step,omitempty" jsonschema:"maxLength=512"`
	// Message is the provider's error when Failed.
	Message string `json:"message,omitempty" jsonschema:"maxLength=4096"`
}
