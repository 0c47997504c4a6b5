package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PluginRollout keeps one PluginInstallation per TargetCluster its selector
// matches, moved to a new template one stage at a time (a canary, then
// batches), halted by a cluster that fails.
//
// +kubebuilder:object:root=true
type PluginRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PluginRolloutSpec   `json:"spec"`
	Status PluginRolloutStatus `json:"status,omitempty"`
}

// PluginRolloutList is a list of PluginRollouts.
//
// +kubebuilder:object:root=true
type PluginRolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PluginRollout `json:"items"`
}

// PluginRolloutSpec installs the same plugins into every TargetCluster its
// selector matches, a stage at a time.
type PluginRolloutSpec struct {
	// ClusterSelector selects TargetClusters in the rollout's namespace by label.
	ClusterSelector LabelSelector `json:"clusterSelector"`
	// Template is the installation made for each selected cluster (its Target is
	// set by the rollout).
	Template PluginInstallationSpec `json:"template"`
	// Strategy says how a change moves across the clusters.
	Strategy RolloutStrategy `json:"strategy,omitempty"`
}

// LabelSelector selects by labels: every MatchLabels pair must match.
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// RolloutStrategy is how a rollout moves.
type RolloutStrategy struct {
	// Canary applies a change to one cluster first, and to the others only once
	// it is Ready. Default true.
	Canary *bool `json:"canary,omitempty"`
	// BatchSize is how many clusters change at once after the canary. Default 1.
	BatchSize int `json:"batchSize,omitempty" jsonschema:"minimum=1,maximum=1000"`
}

// PluginRolloutStatus is where a rollout stands.
type PluginRolloutStatus struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (every cluster has the current template and is Ready),
	// Reconciling, Stalled (halted by a failed cluster).
	Conditions []metav1.Condition `json:"conditions,omitempty" jsonschema:"maxItems=8"`
	// Clusters is each selected cluster's state.
	Clusters []RolloutClusterState `json:"clusters,omitempty" jsonschema:"maxItems=10000"`
}

// RolloutClusterState is one cluster of a rollout.
type RolloutClusterState struct {
	Name string `json:"name"`
	// Phase is Pending (not yet given the current template), Progressing,
	// Ready or Failed.
	Phase   string `json:"phase"`
	Message string `json:"message,omitempty"`
}
