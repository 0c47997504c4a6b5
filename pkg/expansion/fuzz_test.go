package expansion_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/expansion"
	"github.com/kubeplug/kubeplug/test/harness/fuzzseed"
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
	// A forged image layout: a blob not named by its content, an index naming
	// a manifest that is not there, checksums.txt matching all of it.
	b.Reset()
	tw = tar.NewWriter(&b)
	var sums strings.Builder
	for _, e := range []struct{ name, body string }{
		{"expansion.yaml", "apiVersion: kubeplug.dev/v1alpha1\nkind: Expansion\nmetadata: {name: a, version: 1.0.0}\nspec: {}\n"},
		{"images/index.json", `{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:` + strings.Repeat("0", 64) + `","size":2}]}`},
		{"images/blobs/sha256/" + strings.Repeat("1", 64), "{}"},
	} {
		_ = tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(e.body))
		sum := sha256.Sum256([]byte(e.body))
		sums.WriteString(hex.EncodeToString(sum[:]) + "  " + e.name + "\n")
	}
	_ = tw.WriteHeader(&tar.Header{Name: expansion.ChecksumsFile, Mode: 0o644, Size: int64(sums.Len()), Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte(sums.String()))
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
		for name, file := range pkg.Files {
			if expansion.CleanPath(name) != nil {
				t.Fatalf("accepted entry %q", name)
			}
			if hexName, ok := strings.CutPrefix(name, "images/blobs/sha256/"); ok && pkg.Manifest != nil && file.Digest != "sha256:"+hexName {
				t.Fatalf("accepted blob %s whose bytes hash to %s", name, file.Digest)
			}
		}
	})
}
