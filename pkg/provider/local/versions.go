package local

import (
	"fmt"
	"strings"

	"github.com/kubeplug/kubeplug/internal/controlplane"
	"github.com/kubeplug/kubeplug/internal/k8sversions"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// KubernetesVersions returns the Kubernetes versions the provider can run, newest
// first: the ones internal/k8sversions/versions.yaml names, and only those.
func (p *Provider) KubernetesVersions() ([]string, error) {
	return k8sversions.Default().Supported(), nil
}

// CheckKubernetesVersion returns an error wrapping
// provider.ErrUnsupportedVersion, naming the versions the provider can run,
// unless versions.yaml names Kubernetes version v (spec.kubernetesVersion),
// patch release included: the rendered files name v (image tags, the nodes'
// configuration) and plugins' constraints were resolved against it, so running
// another patch release would make them untrue. It then finds the binaries of
// exactly v (resolveBinDir); none is an error too: the provider never runs
// another version than the one the cluster file names.
func (p *Provider) CheckKubernetesVersion(v string) error {
	want, err := k8sversions.Default().Lookup(v)
	if err != nil {
		return fmt.Errorf("%w %s: the local provider runs Kubernetes %s only (the versions in %s)",
			provider.ErrUnsupportedVersion, strings.TrimPrefix(v, "v"),
			strings.Join(k8sversions.Default().Supported(), ", "), k8sversions.File)
	}
	dir, err := p.resolveBinDir(want)
	if err != nil {
		return fmt.Errorf("Kubernetes %s: %w", want.Kubernetes, err)
	}
	p.binDir = dir
	return nil
}

// resolveBinDir finds the binaries of version v: Options.BinDir or
// $KUBEPLUG_LOCALCLUSTER_BIN when set, else the build of `make localcluster`;
// the binaries' own build information must name v.
func (p *Provider) resolveBinDir(v k8sversions.Version) (string, error) {
	dir, err := controlplane.FindBinDir(p.opts.BinDir)
	if err != nil {
		return "", err
	}
	got, err := controlplane.KubernetesVersion(dir)
	if err != nil {
		return "", err
	}
	if got != v.Kubernetes {
		return "", fmt.Errorf("%w: the binaries in %s are Kubernetes %s, not %s; %s",
			controlplane.ErrBinariesNotFound, dir, got, v.Kubernetes, buildHint(v))
	}
	return dir, nil
}

// buildHint says how to get v's binaries without a network.
func buildHint(v k8sversions.Version) string {
	if v.Source == "" {
		return "no Go module of this repository builds it yet, so it needs the download path (docs/versions.md)"
	}
	return "build them with `make localcluster` (module ./" + v.Source + ")"
}

// binDirOrDefault is the resolved binary directory, else Options.BinDir (empty:
// controlplane.FindBinDir's default).
func (p *Provider) binDirOrDefault() string {
	if p.binDir != "" {
		return p.binDir
	}
	return p.opts.BinDir
}
