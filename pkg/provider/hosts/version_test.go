package hosts

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/kubebin"
)

var testSpec = &v1alpha1.HostsProvider{SSH: &v1alpha1.HostSSH{Agent: true}, Pools: []v1alpha1.HostPool{{Name: "control-plane", Hosts: []v1alpha1.Host{{Address: "192.0.2.10"}}}}}

// TestCheckKubernetesVersion: the version of the node programs is accepted,
// any other refused (wrapping provider.ErrUnsupportedVersion) naming both
// versions and the programs' directory; no programs at hand is left to Up.
func TestCheckKubernetesVersion(t *testing.T) {
	dir := os.Getenv(kubebin.BinDirEnv)
	if dir == "" {
		t.Skip("needs $" + kubebin.BinDirEnv + " (make localcluster)")
	}
	have, err := kubebin.Version(filepath.Join(dir, "kube-apiserver"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{ClusterName: "c", StateDir: t.TempDir(), Spec: testSpec, Programs: Programs{LocalclusterBin: dir, LocalnodeBin: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckKubernetesVersion(have); err != nil {
		t.Errorf("the programs' own version %s: %v", have, err)
	}
	err = p.CheckKubernetesVersion("1.30.0")
	if !errors.Is(err, provider.ErrUnsupportedVersion) {
		t.Fatalf("another version: %v, want ErrUnsupportedVersion", err)
	}
	for _, w := range []string{"1.30.0", "are Kubernetes " + have, dir, "set spec.kubernetesVersion to " + have, "--kubernetes-bin"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v\ndoes not say %q", err, w)
		}
	}
	p, _ = New(Options{ClusterName: "c", StateDir: t.TempDir(), Spec: testSpec, Programs: Programs{LocalclusterBin: t.TempDir(), LocalnodeBin: t.TempDir()}})
	if err := p.CheckKubernetesVersion("1.30.0"); err != nil {
		t.Errorf("no programs at hand: %v, want nil (Up names them)", err)
	}
	p, _ = New(Options{ClusterName: "c", StateDir: t.TempDir(), Spec: testSpec, Programs: Programs{LocalclusterBin: dir, LocalnodeBin: t.TempDir(), KubernetesBins: []string{t.TempDir()}}})
	if err := p.CheckKubernetesVersion(have); err == nil || !strings.Contains(err.Error(), "--kubernetes-bin ") {
		t.Errorf("a --kubernetes-bin directory without programs: %v, want it named", err)
	}
}

// TestProgramsPerVersion: with the programs of two versions (make
// localcluster and make localcluster-1.36), spec.kubernetesVersion picks
// its directory (up's --kubernetes-bin option, as the controller gives it);
// a version neither is refused naming both; the state's version refuses a
// downgrade and a skipped minor by name, and allows a patch or the next
// minor; once down forgot the version, any goes.
func TestProgramsPerVersion(t *testing.T) {
	dir := os.Getenv(kubebin.BinDirEnv)
	if dir == "" {
		t.Skip("needs $" + kubebin.BinDirEnv + " (make localcluster)")
	}
	old := filepath.Join(dir, "..", "..", "localcluster-1.36", "bin")
	oldV, err := kubebin.Version(filepath.Join(old, "kube-apiserver"))
	if err != nil {
		t.Skipf("needs make localcluster-1.36 beside $%s: %v", kubebin.BinDirEnv, err)
	}
	newV, err := kubebin.Version(filepath.Join(dir, "kube-apiserver"))
	if err != nil {
		t.Fatal(err)
	}
	newProvider := func(t *testing.T, state string) *Provider {
		t.Helper()
		p, err := provider.New(provider.Config{ClusterName: "c", StateDir: state, Spec: &v1alpha1.Provider{Hosts: testSpec}, Options: []provider.Option{KubernetesBin{old}}})
		if err != nil {
			t.Fatal(err)
		}
		hp := p.(*Provider)
		hp.opts.Programs.LocalclusterBin, hp.opts.Programs.LocalnodeBin = dir, t.TempDir()
		return hp
	}
	state := t.TempDir()
	p := newProvider(t, state)
	if err := p.CheckKubernetesVersion(oldV); err != nil {
		t.Fatalf("%s: %v", oldV, err)
	}
	if p.opts.Programs.LocalclusterBin != old || p.movedFrom != "" {
		t.Errorf("%s picks %s (moved from %q), want %s", oldV, p.opts.Programs.LocalclusterBin, p.movedFrom, old)
	}
	err = newProvider(t, state).CheckKubernetesVersion("1.38.0")
	for _, w := range []string{"1.38.0", dir + " ($" + kubebin.BinDirEnv + ") are Kubernetes " + newV, old + " (--kubernetes-bin) are Kubernetes " + oldV, "one of " + newV + ", " + oldV} {
		if !errors.Is(err, provider.ErrUnsupportedVersion) || !strings.Contains(err.Error(), w) {
			t.Errorf("a version of no programs: %v\ndoes not say %q", err, w)
		}
	}

	// The cluster runs the old version (Up recorded it): the new one is a move.
	if err := p.recordVersion(); err != nil {
		t.Fatal(err)
	}
	p = newProvider(t, state)
	if err := p.CheckKubernetesVersion(newV); err != nil {
		t.Fatalf("%s → %s: %v", oldV, newV, err)
	}
	if p.opts.Programs.LocalclusterBin != dir || p.movedFrom != oldV || p.version != newV {
		t.Errorf("%s → %s picks %s, moved from %q", oldV, newV, p.opts.Programs.LocalclusterBin, p.movedFrom)
	}
	if err := p.recordVersion(); err != nil {
		t.Fatal(err)
	}
	p = newProvider(t, state)
	err = p.CheckKubernetesVersion(oldV)
	if !errors.Is(err, provider.ErrUnsupportedVersion) || !strings.Contains(err.Error(), "runs Kubernetes "+newV+"; a downgrade is not supported") {
		t.Errorf("a downgrade: %v", err)
	}
	if p.version != "" || p.opts.Programs.LocalclusterBin != dir {
		t.Errorf("a refused downgrade chose programs: %s %s", p.version, p.opts.Programs.LocalclusterBin)
	}
	if err := p.forgetVersion(); err != nil {
		t.Fatal(err)
	}
	if err := newProvider(t, state).CheckKubernetesVersion(oldV); err != nil {
		t.Errorf("after down forgot the version, %s: %v", oldV, err)
	}
}

func TestCheckVersionMove(t *testing.T) {
	for _, tc := range []struct{ was, now, err string }{
		{"", "1.37.1", ""},
		{"1.37.1", "1.37.1", ""},
		{"1.37.1", "1.37.4", ""},
		{"1.36.3", "1.37.1", ""},
		{"1.37.1", "1.36.3", "cluster c runs Kubernetes 1.37.1; a downgrade is not supported (no host was touched)"},
		{"1.37.2", "1.37.1", "a downgrade"},
		{"1.35.2", "1.37.1", "cluster c runs Kubernetes 1.35.2; an upgrade moves one minor version at a time (Kubernetes' version skew policy): upgrade to 1.36 first"},
		{"1.37.1", "2.0.0", "upgrade to 1.38 first"},
		{"x", "1.37.1", "cannot compare"},
	} {
		err := checkVersionMove("c", tc.was, tc.now)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s → %s: %v", tc.was, tc.now, err)
		case tc.err != "" && (!errors.Is(err, provider.ErrUnsupportedVersion) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s → %s: %v, want %q", tc.was, tc.now, err, tc.err)
		}
	}
}

// TestRollOrder: the control-plane host rolls first, wherever the file lists
// it, then the workers in host order.
func TestRollOrder(t *testing.T) {
	hosts := []*Host{{Node: "workers-0", Pool: "workers"}, {Node: "control-plane-0", Pool: model.ControlPlanePool}, {Node: "workers-1", Pool: "workers"}, {Node: "edge-0", Pool: "edge"}}
	rolls := map[string]*roll{}
	for _, h := range hosts {
		if h.Node != "edge-0" {
			rolls[h.Node] = &roll{host: h}
		}
	}
	var got []string
	for _, r := range rollOrder(hosts, rolls) {
		got = append(got, r.host.Node)
	}
	if strings.Join(got, " ") != "control-plane-0 workers-0 workers-1" {
		t.Errorf("roll order %v", got)
	}
}
