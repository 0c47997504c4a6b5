package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// TargetCluster is another cluster installations install into, by a
// kubeconfig Secret; the controller reads its version and whether it answers.
//
// +kubebuilder:object:root=true
type TargetCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TargetClusterSpec   `json:"spec"`
	Status TargetClusterStatus `json:"status,omitempty"`
}

// TargetClusterList is a list of TargetClusters.
//
// +kubebuilder:object:root=true
type TargetClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TargetCluster `json:"items"`
}

// TargetClusterSpec is a cluster the controller installs into.
type TargetClusterSpec struct {
	// KubeconfigSecret is a Secret, in the target's namespace, holding a
	// kubeconfig for the cluster under the key "kubeconfig" (or Key).
	KubeconfigSecret KeyRefOptionalKey `json:"kubeconfigSecret"`
	// SuspendExpansions stops passing expansions to this cluster: the
	// installations that target it apply without their spec.expansions.
	SuspendExpansions bool `json:"suspendExpansions,omitempty"`
}

// KeyRefOptionalKey names a Secret and, optionally, its key.
type KeyRefOptionalKey struct {
	Name string `json:"name" jsonschema:"minLength=1,maxLength=253"`
	// Key in the Secret's data; default "kubeconfig".
	Key string `json:"key,omitempty" jsonschema:"maxLength=253"`
}

// TargetClusterStatus is what the controller last read of the cluster.
type TargetClusterStatus struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready is True when the cluster's API server answers.
	Conditions []metav1.Condition `json:"conditions,omitempty" jsonschema:"maxItems=8"`
	// KubernetesVersion is the version the cluster's API server reports.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
}
