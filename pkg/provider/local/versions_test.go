package local_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/discovery"

	"github.com/kubeplug/kubeplug/internal/k8sversions"
	"github.com/kubeplug/kubeplug/pkg/provider/local"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
)

// TestUpFromDownloadedBinaries is the connected case: the binary cache is
// filled from a release mirror on loopback (the binaries built here, laid out
// as the official release locations, with their checksum files), and Up runs
// the cluster from the cache, not from the Go module build next to it.
func TestUpFromDownloadedBinaries(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the mirror serves linux/amd64 release files")
	}
	built := builtVersion(t)
	// $KUBEPLUG_LOCALCLUSTER_BIN, an explicit choice, would win over the cache.
	t.Setenv(controlplane.BinDirEnv, "")
	v, err := k8sversions.Default().Lookup(built)
	if err != nil {
		t.Fatal(err)
	}
	src, err := controlplane.FindBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	multicall, err := filepath.EvalSymlinks(filepath.Join(src, "kube-apiserver"))
	if err != nil {
		t.Fatal(err)
	}
	mirror := releaseMirror(t, v, multicall)

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cacheDir := t.TempDir()
	var lines []string
	c := &k8sversions.Cache{Dir: cacheDir, Mirror: mirror, Progress: func(s string) { lines = append(lines, s) }}
	began := time.Now()
	binDir, err := c.Ensure(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("download of Kubernetes %s from the loopback mirror: %s", built, time.Since(began).Round(time.Millisecond))
	if said := strings.Join(lines, "\n"); !strings.Contains(said, "downloading kube-apiserver of Kubernetes "+built+" from "+mirror+"/dl.k8s.io/release/v"+built+"/bin/linux/amd64/kube-apiserver") {
		t.Errorf("progress %q does not name the download", said)
	}

	dir := filepath.Join(t.TempDir(), "state")
	p, err := local.New(local.Options{StateDir: dir, ClusterName: "test", CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Down(context.Background(), true) })
	cl, err := p.Up(ctx, desired(ctx, t, p, spec{workers: 1}))
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	var st struct {
		BinDir string `json:"binDir"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "controlplane", controlplane.StateFile)) //nolint:gosec // test
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.BinDir != binDir {
		t.Errorf("the control plane runs from %s, want the cache %s", st.BinDir, binDir)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cl.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := dc.ServerVersion()
	if err != nil || sv.GitVersion != "v"+built {
		t.Errorf("server version %v, %v; want v%s", sv, err, built)
	}
	if err := p.Down(ctx, true); err != nil {
		t.Fatal(err)
	}
}

// releaseMirror serves Kubernetes version v's release files for linux/amd64 in
// the official layout under <URL>/<host>/<path>: bin, a binary built here, under
// every component's name (etcd inside its release .tar.gz), with each
// release's checksum files.
func releaseMirror(t *testing.T, v k8sversions.Version, bin string) string {
	t.Helper()
	digest := func(h hash.Hash, path string) string {
		f, err := os.Open(path) //nolint:gosec // test
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		if _, err := io.Copy(h, f); err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(h.Sum(nil))
	}
	expand := func(s string) string {
		for k, r := range map[string]string{"{kubernetes}": v.Kubernetes, "{etcd}": v.Etcd, "{kwok}": v.Kwok, "{os}": "linux", "{arch}": "amd64"} {
			s = strings.ReplaceAll(s, k, r)
		}
		return s
	}
	pathOf := func(u string) string {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		return "/" + p.Host + p.Path
	}
	files := map[string]string{} // URL path -> file
	sums := map[string]string{}  // URL path -> content
	for _, a := range k8sversions.Default().Artifacts {
		file := bin
		if a.Member != "" {
			file = filepath.Join(t.TempDir(), filepath.Base(expand(a.URL)))
			writeTarGz(t, file, expand(a.Member), bin)
		}
		files[pathOf(expand(a.URL))] = file
		h := sha256.New
		if a.Checksum.Algorithm == "sha512" {
			h = sha512.New
		}
		d := digest(h(), file)
		if a.Checksum.Kind == "file" {
			sums[pathOf(expand(a.Checksum.URL))] = d + "\n"
		} else {
			sums[pathOf(expand(a.Checksum.URL))] += d + "  " + expand(a.Checksum.Name) + "\n"
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s, ok := sums[r.URL.Path]; ok {
			_, _ = io.WriteString(w, s)
			return
		}
		if f, ok := files[r.URL.Path]; ok {
			http.ServeFile(w, r, f)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func writeTarGz(t *testing.T, path, member, bin string) {
	t.Helper()
	in, err := os.Open(bin) //nolint:gosec // test
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close() }()
	fi, err := in.Stat()
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(path) //nolint:gosec // test
	if err != nil {
		t.Fatal(err)
	}
	gz, _ := gzip.NewWriterLevel(out, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: member, Mode: 0o755, Size: fi.Size(), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(tw, in); err != nil {
		t.Fatal(err)
	}
	for _, c := range []io.Closer{tw, gz, out} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
