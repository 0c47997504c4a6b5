package realnode

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kubeplug/kubeplug/pkg/provider/nodeimage"
)

// TestLoadArchive pushes a docker-archive tarball and an OCI layout into a
// registry on loopback and pulls them back by repository and tag; an image
// without a name is refused naming the file.
func TestLoadArchive(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := nodeimage.BinaryImage(bin)
	if err != nil {
		t.Fatal(err)
	}
	// A docker-archive carries no manifest media types, so compare images by
	// their configuration, which every format keeps byte for byte.
	want, _ := img.ConfigName()

	tag, _ := name.NewTag("example.com/team/tool:v1")
	tarPath := filepath.Join(dir, "tool.tar")
	if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
		t.Fatal(err)
	}
	lay := filepath.Join(dir, "layout")
	p, err := layout.Write(lay, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"io.containerd.image.name": "docker.io/library/tool:v2"})); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, pushed, repo string }{
		{tarPath, "example.com/team/tool:v1", "team/tool:v1"},
		{lay, "index.docker.io/library/tool:v2", "library/tool:v2"},
	} {
		got, err := LoadArchive(context.Background(), addr, tc.path)
		if err != nil || len(got) != 1 || got[0] != tc.pushed {
			t.Fatalf("LoadArchive(%s) = %v, %v; want [%s]", tc.path, got, err, tc.pushed)
		}
		ref, _ := name.ParseReference(addr+"/"+tc.repo, name.Insecure)
		pulled, err := remote.Image(ref)
		if err != nil {
			t.Fatalf("%s in the registry: %v", tc.repo, err)
		}
		if cfg, _ := pulled.ConfigName(); cfg != want {
			t.Errorf("%s in the registry has config %s, want %s", tc.repo, cfg, want)
		}
	}

	unnamed := filepath.Join(dir, "unnamed")
	p2, _ := layout.Write(unnamed, empty.Index)
	plain, _ := mutate.AppendLayers(empty.Image)
	_ = p2.AppendImage(plain)
	if _, err := LoadArchive(context.Background(), addr, unnamed); err == nil || !strings.Contains(err.Error(), "no image name") {
		t.Errorf("unnamed layout: err = %v", err)
	}
	if _, err := LoadArchive(context.Background(), addr, bin); err == nil || !strings.Contains(err.Error(), "not a docker-archive") {
		t.Errorf("a file that is no archive: err = %v", err)
	}
}

// TestPushProgress: a push with Registry.Progress set tells its start, its
// bytes and its end, in that order, to a registry on loopback.
func TestPushProgress(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte(strings.Repeat("#!/bin/true\n", 10000)), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := nodeimage.BinaryImage(bin)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("example.com/team/tool:v1")
	tarPath := filepath.Join(dir, "tool.tar")
	if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
		t.Fatal(err)
	}
	var got []PushProgress
	if _, err := loadArchive(context.Background(), addr, tarPath, func(p PushProgress) { got = append(got, p) }); err != nil {
		t.Fatal(err)
	}
	if len(got) < 3 {
		t.Fatalf("want a start, byte counts and an end, got %+v", got)
	}
	first, last := got[0], got[len(got)-1]
	if first.Image != addr+"/team/tool:v1" || first.Done || first.Total != 0 {
		t.Errorf("first %+v, want the start of %s/team/tool:v1", first, addr)
	}
	if !last.Done || last.Err != nil {
		t.Errorf("last %+v, want the end without an error", last)
	}
	counts := got[1 : len(got)-1]
	if c := counts[len(counts)-1]; c.Total == 0 || c.Complete != c.Total {
		t.Errorf("the last count is %d of %d bytes, want all of them", c.Complete, c.Total)
	}
	for i := 1; i < len(counts); i++ {
		if counts[i].Complete < counts[i-1].Complete {
			t.Errorf("byte counts go back: %+v", counts)
		}
	}
}
