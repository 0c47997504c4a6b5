// Package k8sversions holds the Kubernetes versions the local provider runs, as
// data (versions.yaml, embedded), and the per-version cache of their binaries.
//
// The one idea: a version is supported because versions.yaml names it, never
// because some binary happens to be at hand. Lookup resolves
// spec.kubernetesVersion against the table and refuses any other version,
// listing the supported ones. Cache.Ensure fills
// os.UserCacheDir()/kubeplug/k8s/<version>/bin from the official release
// locations (or a mirror laid out the same way, $KUBEPLUG_K8S_MIRROR), verifying
// every file against the digest its release publishes, and verifies the cached
// files again on every use; callers fall back to binaries built from Go modules
// (make localcluster) when the network is unreachable.
package k8sversions
