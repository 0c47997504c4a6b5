package k8sversions

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mirror is a release mirror on loopback: every artifact of the table for one
// version, laid out as the official locations are under <mirror>/<host>/<path>,
// with the checksum files their releases publish. Each binary is a real
// executable built here (this test binary with a distinct trailer, so that every
// artifact has its own digest). fault makes one path misbehave.
type mirror struct {
	srv   *httptest.Server
	files map[string][]byte // URL path -> body
	bins  map[string][]byte // artifact name -> the binary the cache must end with
	hits  sync.Map          // URL path -> *atomic.Int32
	fault atomic.Value      // func(path string, w http.ResponseWriter, r *http.Request) bool
	stop  chan struct{}
}

func newMirror(t *testing.T, tab *Table, v Version) *mirror {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.ReadFile(exe) //nolint:gosec // the test binary
	if err != nil {
		t.Fatal(err)
	}
	m := &mirror{files: map[string][]byte{}, bins: map[string][]byte{}, stop: make(chan struct{})}
	sums := map[string]string{} // sums file path -> content
	for _, a := range tab.Artifacts {
		expand := func(s string) string { return v.expand(s, "linux", "amd64") }
		bin := append(append([]byte(nil), base...), []byte("\nkubeplug test artifact "+a.Name+" "+v.Kubernetes+"\n")...)
		m.bins[a.Name] = bin
		body := bin
		if a.Member != "" {
			body = tarGz(t, expand(a.Member), bin)
		}
		m.files[urlPath(t, expand(a.URL))] = body
		var digest string
		if a.Checksum.Algorithm == "sha512" {
			s := sha512.Sum512(body)
			digest = hex.EncodeToString(s[:])
		} else {
			s := sha256.Sum256(body)
			digest = hex.EncodeToString(s[:])
		}
		sumPath := urlPath(t, expand(a.Checksum.URL))
		if a.Checksum.Kind == "file" {
			m.files[sumPath] = []byte(digest + "\n")
		} else {
			sums[sumPath] += "0000000000000000000000000000000000000000000000000000000000000000  something-else\n" + digest + "  " + expand(a.Checksum.Name) + "\n"
		}
	}
	for p, s := range sums {
		m.files[p] = []byte(s)
	}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := m.hits.LoadOrStore(r.URL.Path, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		if f, ok := m.fault.Load().(func(string, http.ResponseWriter, *http.Request) bool); ok && f(r.URL.Path, w, r) {
			return
		}
		b, ok := m.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		_, _ = w.Write(b)
	}))
	t.Cleanup(func() {
		close(m.stop)
		m.srv.CloseClientConnections()
		m.srv.Close()
	})
	return m
}

func urlPath(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return "/" + p.Host + p.Path
}

func tarGz(t *testing.T, name string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		body []byte
	}{{filepath.Dir(name) + "/README.md", []byte("etcd\n")}, {name, b}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o755, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func (m *mirror) hitsOf(path string) int32 {
	n, ok := m.hits.Load(path)
	if !ok {
		return 0
	}
	return n.(*atomic.Int32).Load()
}

// pathOf is the mirror path of artifact name's file (not its checksum).
func (m *mirror) pathOf(t *testing.T, tab *Table, v Version, name string) string {
	t.Helper()
	for _, a := range tab.Artifacts {
		if a.Name == name {
			return urlPath(t, v.expand(a.URL, "linux", "amd64"))
		}
	}
	t.Fatalf("no artifact %s", name)
	return ""
}

type fixture struct {
	tab      *Table
	v        Version
	m        *mirror
	c        *Cache
	progress *[]string
}

func setup(t *testing.T) fixture {
	t.Helper()
	tab := Default()
	v, err := tab.Lookup("1.37.1")
	if err != nil {
		t.Fatal(err)
	}
	m := newMirror(t, tab, v)
	var mu sync.Mutex
	var lines []string
	c := &Cache{
		Dir: t.TempDir(), Mirror: m.srv.URL, Table: tab, GOOS: "linux", GOARCH: "amd64",
		DialTimeout: time.Second, StallTimeout: 500 * time.Millisecond,
		Progress: func(s string) { mu.Lock(); defer mu.Unlock(); lines = append(lines, s) },
	}
	return fixture{tab: tab, v: v, m: m, c: c, progress: &lines}
}

// checkBins: every artifact is in dir, executable, byte for byte the binary the
// mirror published; no temporary file is left.
func (f fixture) checkBins(t *testing.T, dir string) {
	t.Helper()
	for name, want := range f.m.bins {
		p := filepath.Join(dir, name)
		got, err := os.ReadFile(p) //nolint:gosec // test
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes differ from the published binary", name, len(got))
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s: mode %v, want executable", name, fi.Mode())
		}
	}
	f.checkNoTemp(t, dir)
}

func (f fixture) checkNoTemp(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".download-") || strings.Contains(e.Name(), ".extract-") || strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left in the cache", e.Name())
		}
	}
}

func TestEnsureDownloads(t *testing.T) {
	f := setup(t)
	dir, err := f.c.Ensure(t.Context(), f.v)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(f.c.Dir, "1.37.1", "bin"); dir != want {
		t.Errorf("bin dir %s, want %s", dir, want)
	}
	f.checkBins(t, dir)
	if ok, err := f.c.Cached(t.Context(), f.v); !ok || err != nil {
		t.Errorf("cached after ensure = %v, %v; want true", ok, err)
	}
	// A second run fetches nothing.
	apiserver := f.m.pathOf(t, f.tab, f.v, "kube-apiserver")
	if _, err := f.c.Ensure(t.Context(), f.v); err != nil {
		t.Fatal(err)
	}
	if n := f.m.hitsOf(apiserver); n != 1 {
		t.Errorf("kube-apiserver fetched %d times over two runs, want 1", n)
	}
}

// TestEnsureConcurrent: two runs filling one version at once both succeed and
// fetch each file once (the version's directory is locked).
func TestEnsureConcurrent(t *testing.T) {
	f := setup(t)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { _, errs[i] = f.c.Ensure(t.Context(), f.v) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, a := range f.tab.Artifacts {
		if n := f.m.hitsOf(f.m.pathOf(t, f.tab, f.v, a.Name)); n != 1 {
			t.Errorf("%s fetched %d times, want 1", a.Name, n)
		}
	}
	dir, _ := f.c.BinDir(f.v)
	f.checkBins(t, dir)
}

// TestEnsureRefuses: a file the mirror serves wrong is refused with a clear
// error and never lands in the cache under its name; the rest of the version
// is fetched again by the next run once the mirror is right.
func TestEnsureRefuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		artifact string
		fault    func(w http.ResponseWriter, r *http.Request, body []byte, stop <-chan struct{})
		is       error
		says     []string
	}{
		{
			name: "checksum mismatch", artifact: "kube-apiserver", is: ErrChecksum,
			fault: func(w http.ResponseWriter, _ *http.Request, body []byte, _ <-chan struct{}) {
				b := append([]byte(nil), body...)
				b[len(b)/2] ^= 0xff
				_, _ = w.Write(b)
			},
			says: []string{"kube-apiserver", "published sha256", "/dl.k8s.io/release/v1.37.1/bin/linux/amd64/kube-apiserver"},
		},
		{
			name: "checksum mismatch in an archive", artifact: "etcd", is: ErrChecksum,
			fault: func(w http.ResponseWriter, _ *http.Request, body []byte, _ <-chan struct{}) {
				_, _ = w.Write(body[:len(body)-1])
			},
			says: []string{"etcd from", "etcd-v3.7.0-linux-amd64.tar.gz"},
		},
		{
			name: "truncated", artifact: "kubelet", is: ErrDownload,
			fault: func(w http.ResponseWriter, _ *http.Request, body []byte, _ <-chan struct{}) {
				w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				_, _ = w.Write(body[:len(body)/3])
				panic(http.ErrAbortHandler) // the connection drops mid-body
			},
			says: []string{"/kubelet", "bytes"},
		},
		{
			name: "not found", artifact: "kwok", is: ErrDownload,
			fault: func(w http.ResponseWriter, r *http.Request, _ []byte, _ <-chan struct{}) {
				http.NotFound(w, r)
			},
			says: []string{"404 Not Found", "/github.com/kubernetes-sigs/kwok/releases/download/v0.8.0/kwok-linux-amd64"},
		},
		{
			name: "hung server", artifact: "kube-scheduler", is: ErrDownload,
			fault: func(w http.ResponseWriter, r *http.Request, body []byte, stop <-chan struct{}) {
				w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				_, _ = w.Write(body[:1024])
				w.(http.Flusher).Flush()
				select { // sends nothing more
				case <-r.Context().Done():
				case <-stop:
				}
			},
			says: []string{"/kube-scheduler", "no data for 500ms"},
		},
		{
			name: "hung before headers", artifact: "kubectl", is: ErrDownload,
			fault: func(_ http.ResponseWriter, r *http.Request, _ []byte, stop <-chan struct{}) {
				select {
				case <-r.Context().Done():
				case <-stop:
				}
			},
			says: []string{"/kubectl", "timeout"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			bad := f.m.pathOf(t, f.tab, f.v, tc.artifact)
			f.m.fault.Store(func(path string, w http.ResponseWriter, r *http.Request) bool {
				if path != bad {
					return false
				}
				tc.fault(w, r, f.m.files[path], f.m.stop)
				return true
			})
			began := time.Now()
			_, err := f.c.Ensure(t.Context(), f.v)
			if !errors.Is(err, tc.is) {
				t.Fatalf("ensure = %v, want %v", err, tc.is)
			}
			if d := time.Since(began); d > 10*time.Second {
				t.Errorf("ensure took %s to fail", d)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			var ce *ChecksumError
			if errors.As(err, &ce) {
				if len(ce.Want) != 64 || len(ce.Got) != 64 || ce.Want == ce.Got || !strings.Contains(err.Error(), ce.Want) || !strings.Contains(err.Error(), ce.Got) {
					t.Errorf("checksum error %+v does not name both digests", ce)
				}
			}
			dir, _ := f.c.BinDir(f.v)
			if _, err := os.Stat(filepath.Join(dir, tc.artifact)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s in the cache after a failed download: %v", tc.artifact, err)
			}
			f.checkNoTemp(t, dir)
			if ok, _ := f.c.Cached(t.Context(), f.v); ok {
				t.Error("cached after a failed download")
			}
			// The mirror mended, a re-run completes the cache.
			f.m.fault.Store(func(string, http.ResponseWriter, *http.Request) bool { return false })
			if _, err := f.c.Ensure(t.Context(), f.v); err != nil {
				t.Fatal(err)
			}
			f.checkBins(t, dir)
		})
	}
}

// TestCorruptedCache: a cached binary changed on disk is detected on use,
// removed, and fetched again; the others are not fetched again.
func TestCorruptedCache(t *testing.T) {
	f := setup(t)
	dir, err := f.c.Ensure(t.Context(), f.v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "kube-controller-manager")
	b, err := os.ReadFile(p) //nolint:gosec // test
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 0xff
	if err := os.WriteFile(p, b, 0o755); err != nil { //nolint:gosec // an executable
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "kubelet")); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.c.Cached(t.Context(), f.v); ok || err != nil {
		t.Fatalf("cached with a corrupted file = %v, %v; want false", ok, err)
	}
	said := strings.Join(*f.progress, "\n")
	for _, s := range []string{"cached kube-controller-manager of Kubernetes 1.37.1 is corrupted", "cached kubelet of Kubernetes 1.37.1 is corrupted (sha256 none"} {
		if !strings.Contains(said, s) {
			t.Errorf("progress %q does not say %q", said, s)
		}
	}
	if _, err := f.c.Ensure(t.Context(), f.v); err != nil {
		t.Fatal(err)
	}
	f.checkBins(t, dir)
	for name, want := range map[string]int32{"kube-controller-manager": 2, "kubelet": 2, "kube-apiserver": 1} {
		if n := f.m.hitsOf(f.m.pathOf(t, f.tab, f.v, name)); n != want {
			t.Errorf("%s fetched %d times, want %d", name, n, want)
		}
	}
}

// TestUnreachable: a mirror nothing listens on is told at once, as
// ErrUnreachable, with no retries.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	tab := Default()
	v, _ := tab.Lookup("1.37.1")
	c := &Cache{Dir: t.TempDir(), Mirror: "http://" + addr, Table: tab}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	began := time.Now()
	_, err = c.Ensure(ctx, v)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("ensure = %v, want ErrUnreachable naming %s", err, addr)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("unreachable told after %s, want at once", d)
	}
}
