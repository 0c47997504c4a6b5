package oci_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/oci"
)

// TestExpansionPushPull: an expansion archive goes up as one layer and comes
// back byte for byte, by tag and by digest, with its config; the same push
// twice is the same manifest; a plugin is not taken for an expansion, and a
// pull past the size limit leaves no file.
func TestExpansionPushPull(t *testing.T) {
	host := startRegistry(t, nil)
	c := newClient(t, oci.Options{PlainHTTP: true})
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "site.tar")
	want := bytes.Repeat([]byte("expansion bytes "), 4096)
	if err := os.WriteFile(file, want, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := oci.ExpansionConfig{Name: "site", Version: "1.0.0", Digest: "sha256:" + strings.Repeat("a", 64)}
	ref := "oci://" + host + "/expansions/site:1.0.0"
	p, err := c.PushExpansion(ctx, file, ref, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.PushExpansion(ctx, file, ref, cfg)
	if err != nil || p2.Manifest != p.Manifest {
		t.Fatalf("second push: %v, manifest %s (first %s)", err, p2.Manifest, p.Manifest)
	}
	for _, r := range []string{ref, "oci://" + host + "/expansions/site@" + p.Manifest} {
		dir := t.TempDir()
		got, err := c.PullExpansion(ctx, r, dir, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		b, _ := os.ReadFile(got.File)
		if !bytes.Equal(b, want) || got.ExpansionConfig != cfg || got.Manifest != p.Manifest {
			t.Fatalf("%s: pulled %+v (%d bytes)", r, got, len(b))
		}
	}
	dir := t.TempDir()
	if _, err := c.PullExpansion(ctx, ref, dir, 100); err == nil || !strings.Contains(err.Error(), "past the limit of 100") {
		t.Errorf("a pull past the limit: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a refused pull left %v", ents)
	}
	plug := pkgArchive(t, t.TempDir(), "demo", "1.2.3")
	if _, err := c.Push(ctx, plug, "oci://"+host+"/plugins"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PullExpansion(ctx, "oci://"+host+"/plugins/demo:1.2.3", t.TempDir(), 1<<20); err == nil || !strings.Contains(err.Error(), "is not a kubeplug expansion") {
		t.Errorf("a plugin pulled as an expansion: %v", err)
	}
	if _, err := c.PushExpansion(ctx, file, "oci://"+host+"/expansions/site", cfg); err == nil || !strings.Contains(err.Error(), "name a tag") {
		t.Errorf("a push without a tag: %v", err)
	}
}
