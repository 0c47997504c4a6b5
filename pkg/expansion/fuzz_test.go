package expansion_test

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/internal/fuzzseed"
	"github.com/kubeplug/kubeplug/pkg/expansion"
)

// FuzzDecode checks that Decode never panics on any expansion.yaml, and that a
// manifest it accepts is one whose paths stay inside the package.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(strings.ReplaceAll(siteManifest, "%IMAGE%", "registry.example.com/team/app:v1")))
	fuzzseed.Add(f, fuzzseed.YAML())
	f.Fuzz(func(t *testing.T, data []byte) {
		m, _, l := expansion.Decode("expansion.yaml", data)
		if m == nil || l.HasFatal() {
			return
		}
		for _, c := range m.Spec.Charts {
			if expansion.CleanPath(c.Path) != nil {
				t.Fatalf("accepted chart path %q", c.Path)
			}
		}
		for _, h := range m.Spec.Hooks {
			if h.Script != "" && expansion.CleanPath(h.Script) != nil {
				t.Fatalf("accepted hook script %q", h.Script)
			}
		}
	})
}

// FuzzOpenArchive checks that Open never panics on any archive, and that
// whatever it accepts names only clean paths inside the package.
func FuzzOpenArchive(f *testing.F) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range []struct{ name, body string }{
		{"expansion.yaml", "apiVersion: kubeplug.dev/v1alpha1\nkind: Expansion\nmetadata: {name: a, version: 1.0.0}\nspec: {}\n"},
		{"files/x", "x"},
		{"../escape", "y"},
	} {
		_ = tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(e.body))
	}
	_ = tw.Close()
	f.Add(b.Bytes())
	f.Add([]byte{0x1f, 0x8b, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "x.tar")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		pkg, _ := expansion.Open(context.Background(), p, expansion.Limits{MaxFileSize: 1 << 20, MaxSize: 4 << 20, MaxEntries: 100})
		if pkg == nil {
			return
		}
		for name := range pkg.Files {
			if expansion.CleanPath(name) != nil {
				t.Fatalf("accepted entry %q", name)
			}
		}
	})
}
