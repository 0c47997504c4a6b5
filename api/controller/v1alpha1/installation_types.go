package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PluginInstallation is a cluster file's plugins section, kept installed in
// one cluster — the controller's own, or a TargetCluster.
//
// +kubebuilder:object:root=true
type PluginInstallation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PluginInstallationSpec   `json:"spec"`
	Status PluginInstallationStatus `json:"status,omitempty"`
}

// PluginInstallationList is a list of PluginInstallations.
//
// +kubebuilder:object:root=true
type PluginInstallationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PluginInstallation `json:"items"`
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
	// Expansions are expansion packages pulled from OCI references, verified
	// against their keys and merged into every apply of this installation, as
	// `kubeplug apply --expansion-dir` merges them (docs/expansions.md).
	Expansions []ExpansionRef `json:"expansions,omitempty" jsonschema:"maxItems=8"`
	// SuspendExpansions stops passing spec.expansions to the target: the next
	// apply runs without them, which returns the cluster to the default. A
	// rollout sets it for all its clusters in its template.
	SuspendExpansions bool `json:"suspendExpansions,omitempty"`
	// ExpansionSite is the site registry and the allowlist the expansions of
	// spec.expansions are merged with (as --site-registry and the cluster
	// file's spec.expansions.allow).
	ExpansionSite *ExpansionSite `json:"expansionSite,omitempty"`
}

// ExpansionRef is an expansion in an OCI registry, as `kubeplug expansion
// push EXPANSION.tar oci://HOST/REPO:TAG` stores it, and the keys it must be signed with.
type ExpansionRef struct {
	// Ref is oci://HOST/REPO:TAG or oci://HOST/REPO@sha256:HEX.
	Ref string `json:"ref" jsonschema:"pattern=^oci://,maxLength=1024"`
	// VerifyKeys is a ConfigMap, in the installation's namespace, of trusted
	// public keys (as a catalog source's verifyKeys): the expansion must be
	// signed by one of them.
	VerifyKeys string `json:"verifyKeys" jsonschema:"minLength=1,maxLength=253"`
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
	Conditions []metav1.Condition `json:"conditions,omitempty" jsonschema:"maxItems=8"`
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
	// Expansions are the expansions the last successful apply merged, and
	// where: empty when it merged none.
	Expansions []AppliedExpansion `json:"expansions,omitempty" jsonschema:"maxItems=8"`
}

// AppliedExpansion is an expansion an apply merged into a cluster.
type AppliedExpansion struct {
	// Ref is the reference it was pulled from, Manifest that manifest's digest.
	Ref      string `json:"ref"`
	Manifest string `json:"manifest,omitempty"`
	// Name, Version and Digest (the package digest) are the expansion's.
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Digest  string `json:"digest,omitempty"`
	// SignedBy is the ID of the key whose signature verified it.
	SignedBy string `json:"signedBy,omitempty"`
	// Target is the TargetCluster it was applied to; empty: the controller's
	// own cluster. For a ManagedCluster, the ManagedCluster.
	Target string `json:"target,omitempty"`
	// Skips are the steps and checks it skips or delegates, as its manifest
	// says and the site's allowlist allowed: "step NAME", "check
	// PLUGIN/CHECK", "check PLUGIN/CHECK delegated to operator OPERATOR".
	Skips []string `json:"skips,omitempty" jsonschema:"maxItems=64"`
}

// PluginState is one installed plugin.
type PluginState struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Revision int    `json:"revision,omitempty"`
	Ready    bool   `json:"ready"`
}
