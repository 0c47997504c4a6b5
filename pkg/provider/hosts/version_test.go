package hosts

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/kubebin"
)

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
	spec := &v1alpha1.HostsProvider{SSH: &v1alpha1.HostSSH{Agent: true}, Pools: []v1alpha1.HostPool{{Name: "control-plane", Hosts: []v1alpha1.Host{{Address: "192.0.2.10"}}}}}
	p, err := New(Options{ClusterName: "c", StateDir: t.TempDir(), Spec: spec, Programs: Programs{LocalclusterBin: dir, LocalnodeBin: t.TempDir()}})
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
	for _, w := range []string{"1.30.0", "are Kubernetes " + have, dir, "set spec.kubernetesVersion to " + have} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v\ndoes not say %q", err, w)
		}
	}
	p, _ = New(Options{ClusterName: "c", StateDir: t.TempDir(), Spec: spec, Programs: Programs{LocalclusterBin: t.TempDir(), LocalnodeBin: t.TempDir()}})
	if err := p.CheckKubernetesVersion("1.30.0"); err != nil {
		t.Errorf("no programs at hand: %v, want nil (Up names them)", err)
	}
}
