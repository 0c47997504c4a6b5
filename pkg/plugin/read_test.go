package plugin_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// TestLoadRefusesSpecialFiles loads packages whose plugin.yaml, or a file it
// names, is a FIFO or a link to a device: refused at once, never opened.
func TestLoadRefusesSpecialFiles(t *testing.T) {
	manifest := "apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: p, version: 1.0.0}\nspec: {kubernetes: {manifests: [m.yaml]}}\n"
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"manifest is a FIFO", func(t *testing.T, dir string) {
			must(t, syscall.Mkfifo(filepath.Join(dir, "plugin.yaml"), 0o600))
		}, "is a FIFO, not a regular file"},
		{"manifest links to a FIFO", func(t *testing.T, dir string) {
			must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
			must(t, os.Symlink("fifo", filepath.Join(dir, "plugin.yaml")))
		}, "which is a FIFO"},
		{"manifest links to a FIFO in a subdirectory", func(t *testing.T, dir string) {
			must(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
			must(t, syscall.Mkfifo(filepath.Join(dir, "d", "fifo"), 0o600))
			must(t, os.WriteFile(filepath.Join(dir, "plugin.yaml"), []byte(manifest), 0o600))
			must(t, os.Symlink("d/fifo", filepath.Join(dir, "m.yaml")))
		}, "m.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			done := make(chan string, 1)
			go func() {
				p, l := plugin.Load(os.DirFS(dir), plugin.OriginUser, dir)
				if p != nil && !l.HasFatal() {
					done <- "loaded"
					return
				}
				done <- l.String()
			}()
			select {
			case got := <-done:
				if !strings.Contains(got, tc.want) {
					t.Errorf("diagnostics:\n%s\nwant %q", got, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Load hangs on a FIFO")
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
