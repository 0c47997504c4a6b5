// Package v1alpha1 is the Kubernetes API of kubeplug's controller (`kubeplug
// controller`, pkg/controller): the resources PluginCatalog,
// PluginInstallation, TargetCluster, PluginRollout and ManagedCluster of the API group
// kubeplug.dev, version v1alpha1.
//
// They are Kubernetes objects (metav1.TypeMeta and ObjectMeta, runtime.Object
// through the generated zz_generated.deepcopy.go, metav1.Condition in their
// status), registered by AddToScheme, so the controller reads and patches them
// typed. Their CustomResourceDefinitions are generated from these types into
// crds/ (CRDs(); go test ./api/controller/v1alpha1 -run TestCRDsCurrent -update).
//
// The package links apimachinery and nothing else beyond the standard
// library. The file formats plugin authors import (plugin.yaml, cluster.yaml)
// stay in the Kubernetes-free api/v1alpha1, which this package does not
// import and which must never import it.
//
// +kubebuilder:object:generate=true
// +groupName=kubeplug.dev
package v1alpha1

// Regenerate the deepcopy functions with (TestDeepCopyCurrent fails when stale):
//go:generate go -C ../../../tools/controller-gen tool controller-gen object paths=../../api/controller/v1alpha1/...
