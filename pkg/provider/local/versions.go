package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/internal/k8sversions"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
)

// BuildFromSourceEnv names the environment variable that, set to anything, makes the provider run only
// binaries built from Go modules (Options.BuildFromSource).
const BuildFromSourceEnv = "KUBEPLUG_K8S_BUILD_FROM_SOURCE"

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
// exactly v (resolveBinDir), downloading them if need be; none is an error too:
// the provider never runs another version than the one the cluster file names.
func (p *Provider) CheckKubernetesVersion(v string) error {
	return p.checkKubernetesVersion(context.Background(), v)
}

func (p *Provider) checkKubernetesVersion(ctx context.Context, v string) error {
	tab := k8sversions.Default()
	want, err := tab.Lookup(v)
	if err != nil {
		return fmt.Errorf("%w %s: the local provider runs Kubernetes %s only (the versions in %s)",
			provider.ErrUnsupportedVersion, strings.TrimPrefix(v, "v"),
			strings.Join(tab.Supported(), ", "), k8sversions.File)
	}
	if p.binDir != "" && p.binVersion == want.Kubernetes {
		return nil
	}
	dir, err := p.resolveBinDir(ctx, want)
	if err != nil {
		return fmt.Errorf("binaries of Kubernetes %s: %w", want.Kubernetes, err)
	}
	p.binDir, p.binVersion = dir, want.Kubernetes
	return nil
}

// resolveBinDir finds the binaries of version v, trying in order:
//
//  1. Options.BinDir: it must hold v (its build information says so), else an
//     error.
//  2. $KUBEPLUG_LOCALCLUSTER_BIN, when it holds v.
//  3. The binary cache, when every file of v is there and verified (skipped
//     with BuildFromSource).
//  4. The binaries built from Go modules in this repository (make
//     <v.Source>), when they are v.
//  5. A download into the cache (skipped with BuildFromSource); a checksum
//     mismatch is an error, any other failure one progress line and the
//     error saying how to build v instead.
func (p *Provider) resolveBinDir(ctx context.Context, v k8sversions.Version) (string, error) {
	if p.opts.BinDir != "" {
		return builtDir(p.opts.BinDir, v)
	}
	var tried []string
	if env := os.Getenv(controlplane.BinDirEnv); env != "" {
		dir, err := builtDir(env, v)
		if err == nil {
			return dir, nil
		}
		tried = append(tried, "$"+controlplane.BinDirEnv+": "+err.Error())
	}
	fromSource := p.opts.BuildFromSource || os.Getenv(BuildFromSourceEnv) != ""
	cache := &k8sversions.Cache{Dir: p.opts.CacheDir, Progress: func(s string) { p.event("binaries", "", s) }}
	if !fromSource {
		ok, err := cache.Cached(ctx, v)
		if err != nil {
			return "", err
		}
		if ok {
			return cache.BinDir(v)
		}
	}
	if v.Source != "" {
		src, err := controlplane.BuildDir(v.Source)
		if err == nil {
			src, err = builtDir(src, v)
		}
		if err == nil {
			return src, nil
		}
		tried = append(tried, "built from Go modules: "+err.Error())
		if dir := besideBinDirEnv(v.Source); dir != "" {
			found, err := builtDir(dir, v)
			if err == nil {
				return found, nil
			}
			tried = append(tried, "built from Go modules beside $"+controlplane.BinDirEnv+": "+err.Error())
		}
	}
	if fromSource {
		return "", fmt.Errorf("%w: %s (%s is set)", controlplane.ErrBinariesNotFound, strings.Join(append(tried, buildHint(v)), "; "), BuildFromSourceEnv)
	}
	p.event("binaries", "", "downloading Kubernetes "+v.Kubernetes+" into "+mustBinDir(cache, v))
	dir, err := cache.Ensure(ctx, v)
	if err == nil {
		return dir, nil
	}
	if errors.Is(err, k8sversions.ErrChecksum) {
		return "", err
	}
	p.event("binaries", "", "cannot download Kubernetes "+v.Kubernetes+" ("+err.Error()+"); "+buildHint(v))
	return "", fmt.Errorf("%w: %w; %s", controlplane.ErrBinariesNotFound, err, strings.Join(append(tried, buildHint(v)), "; "))
}

func mustBinDir(c *k8sversions.Cache, v k8sversions.Version) string {
	dir, err := c.BinDir(v)
	if err != nil {
		return "the binary cache"
	}
	return dir
}

// besideBinDirEnv is where `make target` puts its build in the output tree
// $KUBEPLUG_LOCALCLUSTER_BIN is in (<out>/localcluster/bin: <out>/target/bin),
// "" without it: another checkout's builds (a git worktree's tests find the
// main checkout's other versions so) or one output tree for several.
func besideBinDirEnv(target string) string {
	env := os.Getenv(controlplane.BinDirEnv)
	if env == "" || filepath.Base(filepath.Clean(env)) != "bin" {
		return ""
	}
	return filepath.Join(filepath.Dir(filepath.Dir(filepath.Clean(env))), target, "bin")
}

// builtDir checks that dir holds binaries built from Go modules of version v.
func builtDir(dir string, v k8sversions.Version) (string, error) {
	dir, err := controlplane.FindBinDir(dir)
	if err != nil {
		return "", err
	}
	got, err := controlplane.KubernetesVersion(dir)
	if err != nil {
		return "", err
	}
	if got != v.Kubernetes {
		return "", fmt.Errorf("%w: the binaries in %s are Kubernetes %s, not %s",
			controlplane.ErrBinariesNotFound, dir, got, v.Kubernetes)
	}
	return dir, nil
}

// buildHint says how to get v's binaries without a network.
func buildHint(v k8sversions.Version) string {
	if v.Source == "" {
		return "no Go module of this repository builds Kubernetes " + v.Kubernetes + ", so it needs the download (docs/versions.md)"
	}
	return "build Kubernetes " + v.Kubernetes + " from Go modules with `make " + v.Source + "` in the kubeplug repository"
}

// binDirOrDefault is the resolved binary directory, else Options.BinDir (empty:
// controlplane.FindBinDir's default).
func (p *Provider) binDirOrDefault() string {
	if p.binDir != "" {
		return p.binDir
	}
	return p.opts.BinDir
}

// checkVersionChange says whether a cluster created with (or last upgraded to)
// Kubernetes version was must be upgraded to now, and refuses a downgrade.
func checkVersionChange(cluster, was, now string) (upgrade bool, err error) {
	now = strings.TrimPrefix(now, "v")
	if was == "" || was == now {
		return false, nil
	}
	a, errA := semver.NewVersion(was)
	b, errB := semver.NewVersion(now)
	if errA != nil || errB != nil {
		return false, fmt.Errorf("%w %s: cluster %s runs Kubernetes %q, which kubeplug cannot compare: run `kubeplug down --purge` and up again",
			provider.ErrUnsupportedVersion, now, cluster, was)
	}
	if b.LessThan(a) {
		return false, fmt.Errorf("%w %s: cluster %s runs Kubernetes %s; a downgrade is not supported: run `kubeplug down --purge` and up again",
			provider.ErrUnsupportedVersion, now, cluster, was)
	}
	// Kubernetes' version skew policy: the API servers of a cluster differ
	// by one minor at most, and kubelets are never newer than them, so an
	// upgrade moves one minor at a time (kubeadm refuses a skip too).
	if b.Major() != a.Major() || b.Minor() > a.Minor()+1 {
		return false, fmt.Errorf("%w %s: cluster %s runs Kubernetes %s; an upgrade moves one minor version at a time (Kubernetes' version skew policy): upgrade to %d.%d first",
			provider.ErrUnsupportedVersion, now, cluster, was, a.Major(), a.Minor()+1)
	}
	return true, nil
}

// kubeletVersion is what simulated nodes report as their kubelet's version:
// the cluster's Kubernetes version, once resolved.
func (p *Provider) kubeletVersion() string {
	if p.binVersion == "" {
		return ""
	}
	return "v" + p.binVersion
}
