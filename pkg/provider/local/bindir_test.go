package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/internal/k8sversions"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
)

// TestResolveBinDirBesideEnv: another version's Go-module build is found in
// the output tree $KUBEPLUG_LOCALCLUSTER_BIN is in, as a git worktree's tests
// find the main checkout's `make localcluster-1.36` (before, only the
// worktree's own _output counted, and TestHAUpgrade could not start at
// 1.36.3 there); a build of the wrong version there is passed over, named.
func TestResolveBinDirBesideEnv(t *testing.T) {
	v, err := k8sversions.Default().Lookup("1.36.3")
	if err != nil || v.Source == "" {
		t.Skipf("no 1.36.3 built from Go modules in the version table: %v", err)
	}
	src := findBuild(t, v.Source)
	out := t.TempDir()
	envDir := filepath.Join(out, "localcluster", "bin")
	built := filepath.Join(out, v.Source, "bin")
	for _, d := range []string{envDir, built} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(built, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(controlplane.BinDirEnv, envDir)
	t.Setenv(BuildFromSourceEnv, "1")
	own, _ := controlplane.BuildDir(v.Source)
	p := &Provider{}
	got, err := p.resolveBinDir(t.Context(), v)
	if err != nil {
		t.Fatalf("resolveBinDir(%s) with %s=%s: %v", v.Kubernetes, controlplane.BinDirEnv, envDir, err)
	}
	if _, ownErr := builtDir(own, v); ownErr == nil {
		// This checkout has its own build: it comes first.
		if got != own {
			t.Errorf("resolveBinDir = %s, want this checkout's %s", got, own)
		}
		return
	}
	if got != built {
		t.Errorf("resolveBinDir = %s, want %s (beside $%s)", got, built, controlplane.BinDirEnv)
	}

	// The other version there: passed over, and said.
	v37, err := k8sversions.Default().Lookup("1.37.1")
	if err != nil {
		t.Fatal(err)
	}
	v37.Source = v.Source
	if _, err := p.resolveBinDir(t.Context(), v37); err == nil || !strings.Contains(err.Error(), "beside $"+controlplane.BinDirEnv+": ") || !strings.Contains(err.Error(), "are Kubernetes 1.36.3, not 1.37.1") {
		t.Errorf("resolveBinDir(1.37.1) from a 1.36.3 build: %v", err)
	}
}

// findBuild is a build of `make target`: this checkout's, else beside
// $KUBEPLUG_LOCALCLUSTER_BIN; the test skips without one.
func findBuild(t *testing.T, target string) string {
	t.Helper()
	var dirs []string
	if d, err := controlplane.BuildDir(target); err == nil {
		dirs = append(dirs, d)
	}
	if d := besideBinDirEnv(target); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if _, err := controlplane.FindBinDir(d); err == nil {
			return d
		}
	}
	t.Skipf("no build of make %s in %v", target, dirs)
	return ""
}
