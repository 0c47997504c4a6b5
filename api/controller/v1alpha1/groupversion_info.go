package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of the controller's resources.
const Group = "kubeplug.dev"

// Version is their API version.
const Version = "v1alpha1"

var (
	// GroupVersion is the group and version of the controller's resources.
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

	// SchemeBuilder registers the controller's resources in a scheme (with
	// apimachinery's builder, not controller-runtime's, so that the package
	// links apimachinery only).
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the controller's resources to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&PluginCatalog{}, &PluginCatalogList{},
		&PluginInstallation{}, &PluginInstallationList{},
		&TargetCluster{}, &TargetClusterList{},
		&PluginRollout{}, &PluginRolloutList{},
		&ManagedCluster{}, &ManagedClusterList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
