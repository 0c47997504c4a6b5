package expansion_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kubeplug/kubeplug/pkg/expansion"
)

// entry is one file of a tar archive a test writes.
type entry struct {
	name string
	data []byte
}

func writeTar(t testing.TB, path string, entries []entry) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// layerTar is an uncompressed layer: a tar holding one file.
func layerTar(t testing.TB, file, content string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: file, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(content)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func configFor(t testing.TB, layers ...[]byte) []byte {
	t.Helper()
	var ids []string
	for _, l := range layers {
		ids = append(ids, "sha256:"+sha(l))
	}
	b, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Cmd": []string{"/app"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": ids},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dockerSaveClassic writes what docker save wrote before docker 25: ID/layer.tar,
// ID.json, manifest.json and repositories. tamper changes the stored layer
// bytes (its diff ID stays what the config says); manifestFirst puts the
// config and manifest.json first, so a truncation hits a layer, not them.
func dockerSaveClassic(t testing.TB, path, repoTag string, tamper func([]byte) []byte, manifestFirst bool) string {
	t.Helper()
	l1, l2 := layerTar(t, "app", "the app\n"), layerTar(t, "etc/app.conf", strings.Repeat("conf\n", 4000))
	cfg := configFor(t, l1, l2)
	cfgID := sha(cfg)
	stored := l2
	if tamper != nil {
		stored = tamper(slices.Clone(l2))
	}
	repo, tag, _ := strings.Cut(repoTag, ":")
	man, _ := json.Marshal([]map[string]any{{"Config": cfgID + ".json", "RepoTags": []string{repoTag}, "Layers": []string{"aaaa/layer.tar", "bbbb/layer.tar"}}})
	repos, _ := json.Marshal(map[string]map[string]string{repo: {tag: cfgID}})
	files := []entry{
		{"aaaa/VERSION", []byte("1.0")}, {"aaaa/layer.tar", l1},
		{"bbbb/VERSION", []byte("1.0")}, {"bbbb/layer.tar", stored},
	}
	meta := []entry{{cfgID + ".json", cfg}, {"manifest.json", man}, {"repositories", repos}}
	if manifestFirst {
		files = append(meta, files...)
	} else {
		files = append(files, meta...)
	}
	writeTar(t, path, files)
	return "sha256:" + sha(l2)
}

// dockerSaveOCI writes what docker 25 and later save: an OCI image layout
// (blobs/sha256/..., index.json, oci-layout) with manifest.json beside it
// naming the blobs, the layers uncompressed.
func dockerSaveOCI(t testing.TB, path, repoTag string) {
	t.Helper()
	l1 := layerTar(t, "bin/tool", "a tool\n")
	cfg := configFor(t, l1)
	m, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + sha(cfg), "size": len(cfg)},
		"layers": []map[string]any{{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": "sha256:" + sha(l1), "size": len(l1)}},
	})
	idx, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []map[string]any{{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + sha(m), "size": len(m),
			"annotations": map[string]string{"io.containerd.image.name": "docker.io/" + repoTag, "org.opencontainers.image.ref.name": strings.SplitN(repoTag, ":", 2)[1]}}},
	})
	man, _ := json.Marshal([]map[string]any{{
		"Config": "blobs/sha256/" + sha(cfg), "RepoTags": []string{repoTag}, "Layers": []string{"blobs/sha256/" + sha(l1)},
		"LayerSources": map[string]any{"sha256:" + sha(l1): map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "size": len(l1), "digest": "sha256:" + sha(l1)}},
	}})
	writeTar(t, path, []entry{
		{"blobs/sha256/" + sha(l1), l1}, {"blobs/sha256/" + sha(cfg), cfg}, {"blobs/sha256/" + sha(m), m},
		{"index.json", idx}, {"manifest.json", man}, {"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
	})
}

func emptySource(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"expansion.yaml": "apiVersion: kubeplug.dev/v1alpha1\nkind: Expansion\nmetadata: {name: site, version: 1.0.0}\nspec: {}\n"})
	return dir
}

// TestImageArchives packs the images of a docker save tarball in the layout
// docker has always written, one in docker 25's OCI layout, one written by
// go-containerregistry's tarball.Write (compressed layers) and an OCI image
// layout directory: each is carried under its full name, and, pushed from the
// expansion to a registry, is a valid image (every layer matches its digest
// and its config's diff ID).
func TestImageArchives(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	classic := filepath.Join(dir, "classic.tar")
	dockerSaveClassic(t, classic, "team/classic:v1", nil, false)
	modern := filepath.Join(dir, "modern.tar")
	dockerSaveOCI(t, modern, "team/modern:v2")

	ggcr := filepath.Join(dir, "ggcr.tar")
	img, err := random.Image(4096, 2)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("registry.example.com/team/random:v3")
	if err := tarball.WriteToFile(ggcr, tag, img); err != nil {
		t.Fatal(err)
	}

	lay := filepath.Join(dir, "layout")
	lp, err := layout.Write(lay, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	img2, _ := random.Image(2048, 1)
	if err := lp.AppendImage(img2, layout.WithAnnotations(map[string]string{"io.containerd.image.name": "registry.example.com/team/fromlayout:v4", "org.opencontainers.image.ref.name": "v4"})); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "site.tar")
	w, l := expansion.Create(ctx, emptySource(t), out, expansion.CreateOptions{Archives: []string{classic, modern, ggcr, lay}})
	if l.HasFatal() {
		t.Fatal(l)
	}
	want := []string{"index.docker.io/team/classic:v1", "index.docker.io/team/modern:v2", "registry.example.com/team/random:v3", "registry.example.com/team/fromlayout:v4"}
	for _, n := range want {
		if !slices.Contains(w.Images, n) {
			t.Errorf("image %s not packed; packed %v", n, w.Images)
		}
	}
	pkg, l := expansion.Open(ctx, out, expansion.Limits{})
	if l.HasFatal() {
		t.Fatalf("the package does not open: %v", l)
	}

	host := startRegistry(t)
	ld := &expansion.Loaded{Package: pkg, Root: out}
	if _, err := ld.PushImages(ctx, host, expansion.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range want {
		ref, err := name.ParseReference(expansion.RewriteImage(n, host))
		if err != nil {
			t.Fatal(err)
		}
		got, err := remote.Image(ref)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if err := validImage(got); err != nil {
			t.Errorf("%s pushed from the expansion is not a valid image: %v", n, err)
		}
	}
	// The random image keeps its layers (compressed, as written) through the
	// docker archive: its config is the same.
	ref, _ := name.ParseReference(expansion.RewriteImage("registry.example.com/team/random:v3", host))
	got, _ := remote.Image(ref)
	gc, _ := got.ConfigName()
	wc, _ := img.ConfigName()
	if gc != wc {
		t.Errorf("random image's config %s, want %s", gc, wc)
	}
}

// TestBrokenImageArchivesAreRefused: a layer whose bytes differ from the
// digest its archive gives, a truncated archive and a damaged OCI layout are
// each refused naming the archive and the layer, and no expansion is written.
func TestBrokenImageArchivesAreRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	flipped := filepath.Join(dir, "flipped.tar")
	layer := dockerSaveClassic(t, flipped, "team/app:v1", func(b []byte) []byte { b[len(b)/3] ^= 0xff; return b }, false)

	truncated := filepath.Join(dir, "truncated.tar")
	layer2 := dockerSaveClassic(t, truncated, "team/app:v1", nil, true)
	b, err := os.ReadFile(truncated)
	if err != nil {
		t.Fatal(err)
	}
	// Cut inside the second layer (about 20 kB, the biggest entry).
	if err := os.WriteFile(truncated, b[:len(b)-16<<10], 0o644); err != nil {
		t.Fatal(err)
	}

	cutManifest := filepath.Join(dir, "cut-manifest.tar")
	dockerSaveClassic(t, cutManifest, "team/app:v1", nil, false)
	if b, err = os.ReadFile(cutManifest); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cutManifest, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}

	lay := filepath.Join(dir, "layout")
	lp, err := layout.Write(lay, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := random.Image(2048, 1)
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"io.containerd.image.name": "registry.example.com/team/x:v1"})); err != nil {
		t.Fatal(err)
	}
	ls, _ := img.Layers()
	d, _ := ls[0].Digest()
	blob := filepath.Join(lay, "blobs", d.Algorithm, d.Hex)
	if b, err = os.ReadFile(blob); err != nil {
		t.Fatal(err)
	}
	b[10] ^= 0xff
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}

	noName := filepath.Join(dir, "noname")
	lp2, _ := layout.Write(noName, empty.Index)
	if err := lp2.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "v1"})); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, archive string
		want          []string
	}{
		{"digest mismatch", flipped, []string{flipped, "layer " + layer, "does not match its content"}},
		{"truncated layer", truncated, []string{truncated, "layer " + layer2, "truncated"}},
		{"truncated before manifest.json", cutManifest, []string{cutManifest, "manifest.json"}},
		{"damaged layout", lay, []string{lay, "layer " + d.String(), "does not match its content"}},
		{"layout image without a full name", noName, []string{noName, "no full image name"}},
		{"not an archive", filepath.Join(dir, "missing.tar"), []string{"missing.tar", "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "site.tar")
			_, l := expansion.Create(ctx, emptySource(t), out, expansion.CreateOptions{Archives: []string{tc.archive}})
			if !l.HasFatal() {
				t.Fatalf("a broken archive was packed: %v", l)
			}
			for _, w := range tc.want {
				if !strings.Contains(l.String(), w) {
					t.Errorf("the error does not say %q:\n%s", w, l)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("an expansion was written")
			}
		})
	}
}

// validImage reads every layer of img and checks its bytes against its digest
// and, uncompressed, against the diff ID its config gives.
func validImage(img v1.Image) error {
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	if len(layers) != len(cfg.RootFS.DiffIDs) {
		return fmt.Errorf("%d layers, %d diff IDs", len(layers), len(cfg.RootFS.DiffIDs))
	}
	for i, l := range layers {
		d, _ := l.Digest()
		for _, c := range []struct {
			open func() (io.ReadCloser, error)
			want v1.Hash
		}{{l.Compressed, d}, {l.Uncompressed, cfg.RootFS.DiffIDs[i]}} {
			rc, err := c.open()
			if err != nil {
				return err
			}
			got, _, err := v1.SHA256(rc)
			_ = rc.Close()
			if err != nil {
				return err
			}
			if got != c.want {
				return fmt.Errorf("layer %d hashes to %s, want %s", i, got, c.want)
			}
		}
	}
	return nil
}
