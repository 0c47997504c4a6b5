package action_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
)

// TestPackageArchiveIsASource packages a scaffolded plugin twice (the same bytes), and
// checks the archive lints clean and lists, as a --plugin-dir, with the directory's
// digest; a broken package is not written.
func TestPackageArchiveIsASource(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	n := action.NewNew()
	n.Dir = work
	dir, err := n.Run(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &action.Config{NoBuiltin: true}
	p := action.NewPackage(cfg)
	p.Output = filepath.Join(work, "a.tgz")
	res, l := p.Run(ctx, dir)
	if l.HasFatal() || res == nil {
		t.Fatalf("package: %v", l)
	}
	p.Output = filepath.Join(work, "b.tgz")
	if _, l := p.Run(ctx, dir); l.HasFatal() {
		t.Fatalf("package again: %v", l)
	}
	a, _ := os.ReadFile(filepath.Join(work, "a.tgz"))
	b, _ := os.ReadFile(filepath.Join(work, "b.tgz"))
	if len(a) == 0 || string(a) != string(b) {
		t.Fatal("packaging the same tree twice gave different archives")
	}

	count, l := action.NewLint(cfg).Run(ctx, res.File)
	if count != 1 || l.HasFatal() {
		t.Fatalf("lint archive: %d packages, %v", count, l)
	}

	for _, src := range []string{dir, res.File} {
		infos, l := action.NewList(&action.Config{NoBuiltin: true, PluginDirs: []string{src}}).Run(ctx)
		if l.HasFatal() || len(infos) != 1 {
			t.Fatalf("list %s: %v %v", src, infos, l)
		}
		if infos[0].Digest != res.Digest {
			t.Fatalf("list %s: digest %s, package printed %s", src, infos[0].Digest, res.Digest)
		}
	}

	// A broken package is refused and nothing is written.
	if err := os.WriteFile(filepath.Join(dir, "plugin.yaml"), []byte("kind: Plugin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.Output = filepath.Join(work, "broken.tgz")
	if res, l := p.Run(ctx, dir); res != nil || !l.HasFatal() {
		t.Fatalf("broken package packaged: %v %v", res, l)
	}
	if _, err := os.Stat(p.Output); !os.IsNotExist(err) {
		t.Fatalf("broken archive written: %v", err)
	}
}

// TestLintRefusesAnUnsafeArchive checks an archive with a traversal entry is a lint
// error naming the archive and the entry.
func TestLintRefusesAnUnsafeArchive(t *testing.T) {
	file := filepath.Join(t.TempDir(), "evil.tgz")
	if err := os.WriteFile(file, evilArchive(t), 0o644); err != nil {
		t.Fatal(err)
	}
	_, l := action.NewLint(&action.Config{NoBuiltin: true}).Run(context.Background(), file)
	if !l.HasFatal() || !strings.Contains(l.String(), "evil.tgz") || !strings.Contains(l.String(), `"../plugin.yaml" climbs out`) {
		t.Fatalf("lint: %v", l)
	}
}

func evilArchive(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	_ = tw.WriteHeader(&tar.Header{Name: "../plugin.yaml", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}
