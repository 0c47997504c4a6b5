package v1alpha1

// The resources of kubeplug's controller (`kubeplug controller`), in the API
// group kubeplug.dev, version v1alpha1. Their CustomResourceDefinitions are
// generated from these types into crds/ (CRDs()); the controller reads and
// writes them as JSON, so these structs are the whole contract.

// Group is the API group of the controller's resources.
const Group = "kubeplug.dev"

// Version is their API version.
const Version = "v1alpha1"

// PluginCatalogSpec says where installations find plugin packages.
type PluginCatalogSpec struct {
	// Sources are searched in order; a plugin found in several is taken from the first.
	Sources []CatalogSource `json:"sources" jsonschema:"minItems=1,maxItems=16"`
}

// CatalogSource is one place packages come from. Exactly one of URL, ConfigMap
// and Secret is set.
type CatalogSource struct {
	// URL of a remote catalog: an https:// index.yaml or an oci:// repository.
	URL string `json:"url,omitempty" jsonschema:"pattern=^(https?|oci)://,maxLength=2048"`
	// Type of the catalog at URL: empty for a kubeplug catalog, helm for a Helm
	// chart repository, whose every chart version is a plugin version (as
	// spec.plugins.sources[].type in a cluster file; docs/helm.md).
	Type string `json:"type,omitempty" jsonschema:"enum=,enum=helm"`
	// ConfigMap, in the catalog's namespace, whose binaryData holds plugin package
	// archives (the .tgz files of `kubeplug plugin package`), one per key.
	ConfigMap string `json:"configMap,omitempty" jsonschema:"maxLength=253"`
	// Secret, in the catalog's namespace, holding package archives like ConfigMap.
	Secret string `json:"secret,omitempty" jsonschema:"maxLength=253"`
	// VerifyKeys is a ConfigMap, in the catalog's namespace, whose keys are public
	// keys (from `kubeplug plugin keygen` or cosign); when set, every package
	// from this source must carry a signature that verifies with one of them.
	VerifyKeys string `json:"verifyKeys,omitempty" jsonschema:"maxLength=253"`
}

// PluginCatalogStatus is what the controller last found in a catalog.
type PluginCatalogStatus struct {
	// ObservedGeneration is the generation the status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready is True when every source could be read.
	Conditions []Condition `json:"conditions,omitempty" jsonschema:"maxItems=8"`
	// Plugins are the plugin versions the catalog offers ("name@version").
	Plugins []string `json:"plugins,omitempty" jsonschema:"maxItems=10000"`
	// ListedFrom identifies what Plugins was listed from: the catalog's
	// sources and the versions of the ConfigMaps and Secrets that hold them.
	// A catalog whose sources are all in the cluster is not listed again while
	// it stays the same (a controller restart reads no package).
	ListedFrom string `json:"listedFrom,omitempty" jsonschema:"maxLength=80"`
}

// PluginInstallationSpec is a cluster file's plugins section, kept installed in
// one cluster by the controller.
type PluginInstallationSpec struct {
	// Catalogs are PluginCatalogs in the installation's namespace, searched in
	// order after the built-in plugins.
	Catalogs []string `json:"catalogs,omitempty" jsonschema:"maxItems=16"`
	// Plugins to install, as cluster.yaml's plugins.enabled; the plugins they
	// require are resolved and installed with them.
	Plugins []InstalledPlugin `json:"plugins" jsonschema:"minItems=1,maxItems=100"`
	// Target is the TargetCluster, in the installation's namespace, to install
	// into; empty installs into the cluster the controller runs in.
	Target string `json:"target,omitempty" jsonschema:"maxLength=253"`
	// DependsOn are installations, in the same namespace, that must be Ready
	// before this one is applied; they cannot be deleted while this one needs them.
	DependsOn []string `json:"dependsOn,omitempty" jsonschema:"maxItems=32"`
	// Suspend stops reconciling: nothing is applied, corrected or removed until
	// it is false again (deleting the installation still uninstalls).
	Suspend bool `json:"suspend,omitempty"`
	// Interval between reconciles that correct drift, for example 10m. Default 10m.
	Interval string `json:"interval,omitempty" jsonschema:"pattern=^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$,maxLength=32"`
	// Timeout for one reconcile's plugins to become ready, for example 5m. Default 5m.
	Timeout string `json:"timeout,omitempty" jsonschema:"pattern=^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$,maxLength=32"`
	// AllowDowngrade applies a lower version of an installed plugin, which is
	// otherwise refused unless the installed version declared it safe (as
	// `kubeplug apply --allow-downgrade`).
	AllowDowngrade bool `json:"allowDowngrade,omitempty"`
	// Adopt takes over the plugins of spec.plugins that the CLI installed
	// (`kubeplug apply` or `up`): without it such a plugin is refused (Stalled,
	// reason OwnedByCLI) and left as it is. Once adopted, a plugin is the
	// installation's: the CLI may no longer change it, and deleting the
	// installation uninstalls it.
	Adopt bool `json:"adopt,omitempty"`
}

// InstalledPlugin is one plugin of an installation.
type InstalledPlugin struct {
	// Name of the plugin.
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=63"`
	// Version is a semver constraint. Empty means the newest the catalogs offer
	// for the cluster's Kubernetes version.
	Version string `json:"version,omitempty" jsonschema:"maxLength=128"`
	// Values for the plugin, deep-merged over its defaults.
	Values Values `json:"values,omitempty"`
	// ValuesFrom merges values from Secrets, ConfigMaps and the target cluster
	// after Values, in order.
	ValuesFrom []InstallationValuesSource `json:"valuesFrom,omitempty" jsonschema:"maxItems=32"`
}

// InstallationValuesSource is a value from the management cluster. Exactly one
// of SecretKeyRef, ConfigMapKeyRef and TargetField is set.
type InstallationValuesSource struct {
	// SecretKeyRef is a key of a Secret in the installation's namespace. Its text
	// is YAML merged at Path (default the root), or, with Path set, the string set
	// there.
	SecretKeyRef *KeyRef `json:"secretKeyRef,omitempty"`
	// ConfigMapKeyRef is a key of a ConfigMap in the installation's namespace,
	// read like SecretKeyRef.
	ConfigMapKeyRef *KeyRef `json:"configMapKeyRef,omitempty"`
	// TargetField is a JSON pointer into the TargetCluster object (for example
	// /metadata/labels/region or /status/kubernetesVersion) whose value is set at
	// Path. Needs a Target.
	TargetField string `json:"targetField,omitempty" jsonschema:"pattern=^/,maxLength=512"`
	// Path is a JSON pointer into the values; required with TargetField.
	Path string `json:"path,omitempty" jsonschema:"maxLength=512"`
	// Optional skips a missing Secret, ConfigMap, key or field instead of failing.
	Optional bool `json:"optional,omitempty"`
}

// KeyRef names a key of a Secret or ConfigMap.
type KeyRef struct {
	Name string `json:"name" jsonschema:"minLength=1,maxLength=253"`
	Key  string `json:"key" jsonschema:"minLength=1,maxLength=253"`
}

// PluginInstallationStatus is what the controller last did.
type PluginInstallationStatus struct {
	// ObservedGeneration is the generation the status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions, kstatus-compatible: Ready, Reconciling, Stalled (Reconciling
	// and Stalled are never both True, and Ready is False while either is);
	// MachineNotApplied is True while an installed plugin contributes to the
	// machines (control-plane flags, node files, units, labels, taints, hooks),
	// which the controller does not apply.
	Conditions []Condition `json:"conditions,omitempty" jsonschema:"maxItems=8"`
	// KubernetesVersion is the target cluster's version the plugins were
	// resolved for.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// Plugins are the installed plugins, the required ones included.
	Plugins []PluginState `json:"plugins,omitempty" jsonschema:"maxItems=1000"`
	// LastAppliedGeneration is the generation last applied successfully.
	LastAppliedGeneration int64 `json:"lastAppliedGeneration,omitempty"`
	// LastAppliedDigest identifies everything that apply used (the spec, the
	// values read from Secrets and ConfigMaps, the catalogs' versions, the
	// cluster's version): a reconcile with the same digest before the interval
	// is up does not apply again.
	LastAppliedDigest string `json:"lastAppliedDigest,omitempty"`
	// LastAppliedTime is when the last successful apply ended (RFC 3339).
	LastAppliedTime string `json:"lastAppliedTime,omitempty" jsonschema:"format=date-time"`
}

// PluginState is one installed plugin.
type PluginState struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Revision int    `json:"revision,omitempty"`
	Ready    bool   `json:"ready"`
}

// Condition is a metav1.Condition.
type Condition struct {
	Type               string `json:"type" jsonschema:"maxLength=316"`
	Status             string `json:"status" jsonschema:"enum=True,enum=False,enum=Unknown"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime" jsonschema:"format=date-time"`
	Reason             string `json:"reason" jsonschema:"maxLength=1024"`
	Message            string `json:"message" jsonschema:"maxLength=32768"`
}

// TargetClusterSpec is a cluster the controller installs into.
type TargetClusterSpec struct {
	// KubeconfigSecret is a Secret, in the target's namespace, holding a
	// kubeconfig for the cluster under the key "kubeconfig" (or Key).
	KubeconfigSecret KeyRefOptionalKey `json:"kubeconfigSecret"`
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
	Conditions []Condition `json:"conditions,omitempty" jsonschema:"maxItems=8"`
	// KubernetesVersion is the version the cluster's API server reports.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
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
	Conditions []Condition `json:"conditions,omitempty" jsonschema:"maxItems=8"`
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
