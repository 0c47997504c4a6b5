// Package kubebin reads what the Kubernetes programs kubeplug builds say about
// themselves, for every provider that delivers or runs them: the Kubernetes
// version a binary was built from. It runs nothing.
package kubebin

import (
	"debug/buildinfo"
	"fmt"
	"runtime/debug"
	"strings"
)

// BinDirEnv names the directory of the control-plane programs (make
// localcluster's output), for the providers that find them there.
const BinDirEnv = "KUBEPLUG_LOCALCLUSTER_BIN"

// kubernetesModule is the module whose version is the Kubernetes version of a
// localcluster binary (see localcluster/go.mod).
const kubernetesModule = "k8s.io/kubernetes"

// Version returns the Kubernetes version bin was built from, such as
// "1.37.1": the version of k8s.io/kubernetes in its build information, which
// the Go toolchain records in every binary (it survives stripping, and does
// not depend on the link-time version stamp).
func Version(bin string) (string, error) {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("read the build information of %s: %w", bin, err)
	}
	v, ok := kubernetesVersionOf(bi)
	if !ok {
		return "", fmt.Errorf("read the Kubernetes version of %s: its build information names no %s module", bin, kubernetesModule)
	}
	return v, nil
}

// kubernetesVersionOf finds k8s.io/kubernetes among the binary's modules (a
// dependency of the localcluster module, or the main module of a binary built
// from the Kubernetes tree), following a replace directive.
func kubernetesVersionOf(bi *debug.BuildInfo) (string, bool) {
	mods := append([]*debug.Module{&bi.Main}, bi.Deps...)
	for _, m := range mods {
		if m == nil || m.Path != kubernetesModule {
			continue
		}
		if m.Replace != nil && m.Replace.Version != "" {
			m = m.Replace
		}
		if m.Version == "" || m.Version == "(devel)" {
			return "", false
		}
		return strings.TrimPrefix(m.Version, "v"), true
	}
	return "", false
}
