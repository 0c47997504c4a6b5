package hosts

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/kubebin"
)

var _ provider.VersionChecker = (*Provider)(nil)

// KubernetesBin is the provider.Option of `up --kubernetes-bin DIR` (and of
// the controller's flag of the same name): a directory of
// kubeplug-localcluster (make localcluster, make localcluster-1.36) of one
// Kubernetes version, besides $KUBEPLUG_LOCALCLUSTER_BIN's. The cluster
// file's spec.kubernetesVersion picks among them.
type KubernetesBin struct{ Dir string }

// Provider implements provider.Option.
func (KubernetesBin) Provider() string { return Name }

func (b KubernetesBin) String() string { return "--kubernetes-bin " + b.Dir }

// kubernetesBinFlag is --kubernetes-bin: each use adds one directory, made
// absolute.
type kubernetesBinFlag struct{ opts *[]provider.Option }

func (kubernetesBinFlag) String() string { return "" }
func (kubernetesBinFlag) Type() string   { return "dir" }

func (f kubernetesBinFlag) Set(v string) error {
	abs, err := filepath.Abs(v)
	if err != nil {
		return err
	}
	*f.opts = append(*f.opts, KubernetesBin{abs})
	return nil
}

func defineKubernetesBinFlag(fs *pflag.FlagSet, opts *[]provider.Option) {
	fs.Var(kubernetesBinFlag{opts}, "kubernetes-bin", "hosts provider: a directory of kubeplug-localcluster of another Kubernetes version (make localcluster-1.36), besides $"+kubebin.BinDirEnv+"'s; spec.kubernetesVersion picks among them (repeatable)")
}

// programsOf is one directory of Kubernetes node programs and its version.
type programsOf struct {
	dir, from, version string
}

// kubernetesPrograms are the directories of Kubernetes node programs the
// provider has — LocalclusterBin's ($KUBEPLUG_LOCALCLUSTER_BIN) first, then
// each of KubernetesBins — with the version each one's kube-apiserver was
// built from (kubebin.Version). A KubernetesBins directory whose version
// cannot be read is an error naming it; LocalclusterBin's is left out (Up
// names programs it cannot find).
func (progs Programs) kubernetesPrograms() ([]programsOf, error) {
	var out []programsOf
	if progs.LocalclusterBin != "" {
		if v, err := kubebin.Version(filepath.Join(progs.LocalclusterBin, "kube-apiserver")); err == nil {
			out = append(out, programsOf{progs.LocalclusterBin, "$" + kubebin.BinDirEnv, v})
		}
	}
	for _, dir := range progs.KubernetesBins {
		v, err := kubebin.Version(filepath.Join(dir, "kube-apiserver"))
		if err != nil {
			return nil, fmt.Errorf("--kubernetes-bin %s: %w", dir, err)
		}
		out = append(out, programsOf{dir, "--kubernetes-bin", v})
	}
	return out, nil
}

// CheckKubernetesVersion implements provider.VersionChecker. The hosts run
// the Kubernetes of the node programs the provider delivers — a
// kubeplug-localcluster program, which is the kubelet, kube-proxy and the
// control plane's images. The provider has one directory of them per version
// (Programs.LocalclusterBin and Programs.KubernetesBins, each one's version
// read from its kube-apiserver); spec.kubernetesVersion picks the one of its
// version, patch release included. A version none of them is, a downgrade of
// the running cluster or a skip of a minor version is refused before any host
// is touched, with an error wrapping provider.ErrUnsupportedVersion that names
// the versions and directories.
//
// Programs that cannot be found are not this check's to report: Up names
// them.
func (p *Provider) CheckKubernetesVersion(v string) error {
	return p.selectVersion(v)
}

// selectVersion points Programs.LocalclusterBin at the programs of version v
// and checks the move from the version the cluster runs (versionFile), once
// per provider.
func (p *Provider) selectVersion(v string) error {
	v = strings.TrimPrefix(v, "v")
	if v == "" || p.version == v {
		return nil
	}
	// The other node programs missing is Up's to name; the Kubernetes
	// programs are looked for all the same.
	progs, _ := p.opts.Programs.withDefaults()
	have, err := progs.kubernetesPrograms()
	if err != nil {
		return err
	}
	i := slices.IndexFunc(have, func(h programsOf) bool { return h.version == v })
	if i < 0 {
		if len(have) == 0 {
			return nil
		}
		return refuseVersion(v, have)
	}
	was, err := p.runningVersion()
	if err != nil {
		return err
	}
	if err := checkVersionMove(p.opts.ClusterName, was, v); err != nil {
		return err
	}
	p.opts.Programs.LocalclusterBin = have[i].dir
	p.version, p.movedFrom = v, ""
	if was != "" && was != v {
		p.movedFrom = was
	}
	return nil
}

// refuseVersion is the refusal of version v, which none of the programs the
// provider has are.
func refuseVersion(v string, have []programsOf) error {
	var are, vs []string
	for _, h := range have {
		are = append(are, fmt.Sprintf("those in %s (%s) are Kubernetes %s", h.dir, h.from, h.version))
		vs = append(vs, h.version)
	}
	to := vs[0]
	if len(vs) > 1 {
		to = "one of " + strings.Join(vs, ", ")
	}
	return fmt.Errorf("%w %s: the hosts provider runs the Kubernetes of the node programs it delivers, and %s: set spec.kubernetesVersion to %s, or run kubeplug with the programs of %s (--kubernetes-bin)",
		provider.ErrUnsupportedVersion, v, strings.Join(are, "; "), to, v)
}

// versionFile, in the state directory, is the Kubernetes version the
// cluster's hosts run or are being moved to: Up writes it before it touches a
// host with the programs of a version.
const versionFile = "kubernetes-version"

// runningVersion is versionFile's version, "" before the first Up.
func (p *Provider) runningVersion() (string, error) {
	b, err := os.ReadFile(filepath.Join(p.opts.StateDir, versionFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(b)), err
}

// recordVersion writes the version Up brings the hosts to, before any host
// is touched: a move that stops halfway is recorded as the new version, so
// that going back (a downgrade of the hosts already moved) is refused and a
// re-run goes on with the move. A move is announced.
func (p *Provider) recordVersion() error {
	if p.version == "" {
		return nil
	}
	if p.movedFrom != "" {
		p.opts.Events(provider.Event{Time: time.Now(), Step: "upgrade", Message: fmt.Sprintf("moving cluster %s from Kubernetes %s to %s: the control-plane host first, then the workers one at a time", p.opts.ClusterName, p.movedFrom, p.version)})
	}
	if err := os.MkdirAll(p.opts.StateDir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(p.opts.StateDir, versionFile), []byte(p.version+"\n"), 0o600)
}

// forgetVersion removes versionFile: down left no host running Kubernetes.
func (p *Provider) forgetVersion() error {
	if err := os.Remove(filepath.Join(p.opts.StateDir, versionFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// checkVersionMove refuses moving cluster from Kubernetes was to now when it
// is a downgrade or skips a minor version (Kubernetes' version skew policy:
// the API server moves one minor at a time, and kubelets are never newer
// than it).
func checkVersionMove(cluster, was, now string) error {
	if was == "" || was == now {
		return nil
	}
	a, errA := semver.NewVersion(was)
	b, errB := semver.NewVersion(now)
	if errA != nil || errB != nil {
		return fmt.Errorf("%w %s: cluster %s runs Kubernetes %q (its state's %s), which kubeplug cannot compare", provider.ErrUnsupportedVersion, now, cluster, was, versionFile)
	}
	if b.LessThan(a) {
		return fmt.Errorf("%w %s: cluster %s runs Kubernetes %s; a downgrade is not supported (no host was touched): run `kubeplug down` and up again",
			provider.ErrUnsupportedVersion, now, cluster, was)
	}
	if b.Major() != a.Major() || b.Minor() > a.Minor()+1 {
		return fmt.Errorf("%w %s: cluster %s runs Kubernetes %s; an upgrade moves one minor version at a time (Kubernetes' version skew policy): upgrade to %d.%d first (no host was touched)",
			provider.ErrUnsupportedVersion, now, cluster, was, a.Major(), a.Minor()+1)
	}
	return nil
}

// waitAPIVersion waits until the cluster's API server says it is Kubernetes
// p.version (/version) and its etcd is healthy (/readyz/etcd): after the
// control-plane host of a version move is rolled, before the next host.
func (p *Provider) waitAPIVersion(ctx context.Context, kc kubernetes.Interface, h *Host) error {
	if p.version == "" {
		return nil
	}
	want := "v" + p.version
	deadline := time.Now().Add(p.timeouts.ready)
	last := ""
	for {
		info, err := kc.Discovery().ServerVersion()
		switch {
		case err != nil:
			last = err.Error()
		case info.GitVersion != want:
			last = "the API server says " + info.GitVersion
		default:
			_, err := kc.Discovery().RESTClient().Get().AbsPath("/readyz/etcd").DoRaw(ctx)
			if err == nil {
				return nil
			}
			last = "etcd: " + err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the API server is not Kubernetes %s with a healthy etcd within %s: %s", label(h), p.version, p.timeouts.ready, last)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(time.Second):
		}
	}
}
