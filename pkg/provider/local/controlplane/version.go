package controlplane

import (
	"path/filepath"

	"github.com/kubeplug/kubeplug/pkg/provider/internal/kubebin"
)

// KubernetesVersion returns the Kubernetes version the control plane binaries in
// binDir were built from, such as "1.37.1": the version of k8s.io/kubernetes in
// kube-apiserver's build information, which the Go toolchain records in every
// binary (it survives stripping, and does not depend on the link-time version
// stamp). It does not run the binary. binDir is resolved as by FindBinDir.
func KubernetesVersion(binDir string) (string, error) {
	dir, err := FindBinDir(binDir)
	if err != nil {
		return "", err
	}
	return kubebin.Version(filepath.Join(dir, string(APIServer)))
}
