package expansion_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/expansion"
)

// TestHookHome: an installer hook's HOME (and the XDG directories) is an
// empty directory of its own, not the user's, removed when the hook ends.
func TestHookHome(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"expansion.yaml": "apiVersion: kubeplug.dev/v1alpha1\nkind: Expansion\nmetadata: {name: site, version: 1.0.0}\nspec: {}\n"})
	pkg, l := expansion.OpenSource(context.Background(), dir, expansion.Limits{})
	if l.HasFatal() {
		t.Fatal(l)
	}
	user := t.TempDir()
	writeFiles(t, user, map[string]string{".kube/config": "the user's"})
	t.Setenv("HOME", user)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(user, ".config"))
	out := filepath.Join(t.TempDir(), "env")
	h := expansion.Hook{
		InstallerHook: v1alpha1.InstallerHook{Name: "env", At: v1alpha1.HookControlPlaneReady,
			Command: []string{"sh", "-c", `{ echo "$HOME"; echo "$XDG_CONFIG_HOME"; ls -A "$HOME"; cat ~/.kube/config 2>/dev/null || echo no-config; } > ` + out}},
		Expansion: &expansion.Loaded{Package: pkg, Root: dir},
	}
	if err := h.Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || lines[0] == user || !strings.HasPrefix(lines[1], lines[0]+"/") || lines[2] != "no-config" {
		t.Fatalf("the hook saw HOME, XDG_CONFIG_HOME, its home's files and ~/.kube/config as:\n%s", b)
	}
	if _, err := os.Stat(lines[0]); !os.IsNotExist(err) {
		t.Errorf("the hook's HOME %s is left after it: %v", lines[0], err)
	}
}
