package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PluginCatalog says where installations find plugin packages: https:// and
// oci:// catalogs, or package archives held in a ConfigMap or Secret,
// optionally signed.
//
// +kubebuilder:object:root=true
type PluginCatalog struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PluginCatalogSpec   `json:"spec"`
	Status PluginCatalogStatus `json:"status,omitempty"`
}

// PluginCatalogList is a list of PluginCatalogs.
//
// +kubebuilder:object:root=true
type PluginCatalogList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PluginCatalog `json:"items"`
}

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
	Conditions []metav1.Condition `json:"conditions,omitempty" jsonschema:"maxItems=8"`
	// Plugins are the plugin versions the catalog offers ("name@version").
	Plugins []string `json:"plugins,omitempty" jsonschema:"maxItems=10000"`
	// ListedFrom identifies what Plugins was listed from: the catalog's
	// sources and the versions of the ConfigMaps and Secrets that hold them.
	// A catalog whose sources are all in the cluster is not listed again while
	// it stays the same (a controller restart reads no package).
	ListedFrom string `json:"listedFrom,omitempty" jsonschema:"maxLength=80"`
}
