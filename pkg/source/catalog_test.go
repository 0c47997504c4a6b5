package source_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// published is one archive a test catalog serves, with its index entry.
type published struct {
	name  string
	data  []byte
	entry source.CatalogEntry
}

func publish(t *testing.T, name, version, spec string) published {
	t.Helper()
	fsys := fstest.MapFS{"plugin.yaml": manifest(name, version, spec)}
	pkg, l := plugin.Load(fsys, plugin.OriginUser, name)
	if l.HasFatal() {
		t.Fatalf("load %s: %v", name, l)
	}
	var buf bytes.Buffer
	if err := archive.Write(&buf, fsys); err != nil {
		t.Fatal(err)
	}
	return published{name: name, data: buf.Bytes(), entry: source.EntryOf(pkg, name+"-"+version+".tgz")}
}

// catalog serves an index of ps (after edit) and their archives; hits counts
// archive downloads.
type catalog struct {
	ps    []published
	edit  func(*source.CatalogIndex)
	hits  atomic.Int32
	fail  atomic.Int32 // status to answer everything with, when set
	delay time.Duration
}

func (c *catalog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.delay > 0 {
		select {
		case <-time.After(c.delay):
		case <-r.Context().Done():
			return
		}
	}
	if s := c.fail.Load(); s != 0 {
		http.Error(w, "broken", int(s))
		return
	}
	if r.URL.Path == "/repo/index.yaml" || r.URL.Path == "/repo/index.json" {
		x := source.CatalogIndex{APIVersion: source.IndexAPIVersion, Kind: source.IndexKind, Entries: map[string][]source.CatalogEntry{}}
		for _, p := range c.ps {
			x.Entries[p.name] = append(x.Entries[p.name], p.entry)
		}
		if c.edit != nil {
			c.edit(&x)
		}
		b, _ := yaml.Marshal(x)
		if strings.HasSuffix(r.URL.Path, ".json") {
			b, _ = json.MarshalIndent(x, "", " ")
			b = append([]byte("\n  "), b...) // blanks before the '{' still make it JSON
		}
		_, _ = w.Write(b)
		return
	}
	for _, p := range c.ps {
		if r.URL.Path == "/repo/"+p.entry.URLs[0] {
			c.hits.Add(1)
			_, _ = w.Write(p.data)
			return
		}
	}
	http.NotFound(w, r)
}

func newCatalog(t *testing.T) *catalog {
	return &catalog{ps: []published{
		publish(t, "a", "1.0.0", `{requires: [{name: b, version: ">=1.1"}]}`),
		publish(t, "a", "1.1.0", `{requires: [{name: b, version: ">=1.1"}]}`),
		publish(t, "b", "1.2.0", `{kubernetesVersion: ">=1.30"}`),
	}}
}

func fetchAll(t *testing.T, src source.Source) ([]*plugin.Package, string) {
	t.Helper()
	ctx := context.Background()
	idx, l := source.List(ctx, src)
	if l.HasFatal() {
		return nil, l.String()
	}
	pkgs, l := source.FetchAll(ctx, idx, idx.All(), 4)
	return pkgs, l.String()
}

func TestHTTPCatalog(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "TLS with a test CA"}[tls], func(t *testing.T) {
			c := newCatalog(t)
			var srv *httptest.Server
			if tls {
				srv = httptest.NewTLSServer(c)
			} else {
				srv = httptest.NewServer(c)
			}
			defer srv.Close()
			cache := &source.Cache{Dir: t.TempDir()}
			src := source.HTTPCatalog(source.OriginCatalog, srv.URL+"/repo/index.yaml", source.HTTPOptions{Client: srv.Client(), Cache: cache})
			idx, l := source.List(context.Background(), src)
			if l.HasFatal() {
				t.Fatal(l)
			}
			// Listing downloads no archive; the resolver sees the index's fields.
			if n := c.hits.Load(); n != 0 {
				t.Fatalf("listing downloaded %d archives", n)
			}
			v, err := idx.Find("a", "")
			if err != nil || v.Version.String() != "1.1.0" || len(v.Requires) != 1 || v.Requires[0].Name != "b" || v.Digest == "" {
				t.Fatalf("find a: %+v %v", v, err)
			}
			pkg, l := idx.Fetch(context.Background(), v)
			if pkg == nil || l.HasFatal() {
				t.Fatalf("fetch: %v", l)
			}
			if pkg.Digest != v.Digest || pkg.Origin != source.OriginCatalog || !strings.HasSuffix(pkg.Location, "/repo/a-1.1.0.tgz") {
				t.Fatalf("package %s from %s (%s)", pkg.Digest, pkg.Location, pkg.Origin)
			}
			if n := c.hits.Load(); n != 1 {
				t.Fatalf("%d archives downloaded, want only the one picked", n)
			}
			// A fresh listing fetches from the cache, not the network.
			idx2, _ := source.List(context.Background(), src)
			v2, _ := idx2.Find("a", "")
			if pkg, l := idx2.Fetch(context.Background(), v2); pkg == nil || c.hits.Load() != 1 {
				t.Fatalf("cached fetch: %d downloads, %v", c.hits.Load(), l)
			}
		})
	}
}

// TestHTTPCatalogJSONIndex: an index.json lists exactly what the same index.yaml
// lists, and its packages fetch the same.
func TestHTTPCatalogJSONIndex(t *testing.T) {
	c := newCatalog(t)
	srv := httptest.NewServer(c)
	defer srv.Close()
	var got [2][]string
	for i, name := range []string{"index.yaml", "index.json"} {
		pkgs, diags := fetchAll(t, source.HTTPCatalog(source.OriginCatalog, srv.URL+"/repo/"+name, source.HTTPOptions{Cache: &source.Cache{Dir: t.TempDir()}}))
		if diags != "" {
			t.Fatalf("%s: %s", name, diags)
		}
		for _, p := range pkgs {
			got[i] = append(got[i], p.ID()+" "+p.Digest)
		}
	}
	if len(got[0]) != 3 || strings.Join(got[0], ",") != strings.Join(got[1], ",") {
		t.Errorf("index.yaml listed %v, index.json %v", got[0], got[1])
	}
	if _, err := source.DecodeIndex([]byte(" {\"entries\": [}")); err == nil {
		t.Error("a broken JSON index decoded")
	}
}

func TestHTTPCatalogTLSNeedsTheCA(t *testing.T) {
	srv := httptest.NewUnstartedServer(newCatalog(t))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake failure is the point
	srv.StartTLS()
	defer srv.Close()
	_, msg := fetchAll(t, source.HTTPCatalog(source.OriginCatalog, srv.URL+"/repo/index.yaml", source.HTTPOptions{Client: &http.Client{}}))
	if !strings.Contains(msg, "certificate") {
		t.Fatalf("an unknown CA was accepted: %s", msg)
	}
}

func TestHTTPCatalogRefuses(t *testing.T) {
	lie := func(f func(x *source.CatalogIndex)) func(*catalog) { return func(c *catalog) { c.edit = f } }
	for _, tc := range []struct {
		name    string
		setup   func(*catalog)
		timeout time.Duration
		want    []string
	}{
		{name: "index 404", setup: func(c *catalog) { c.fail.Store(404) }, want: []string{"/repo/index.yaml", "cannot read the catalog index", "404 Not Found"}},
		{name: "index 500", setup: func(c *catalog) { c.fail.Store(500) }, want: []string{"cannot read the catalog index", "500 Internal Server Error"}},
		{name: "slow", setup: func(c *catalog) { c.delay = 2 * time.Second }, timeout: 100 * time.Millisecond, want: []string{"cannot read the catalog index", "deadline exceeded"}},
		{name: "archive 404", setup: lie(func(x *source.CatalogIndex) { x.Entries["b"][0].URLs = []string{"missing.tgz"} }), want: []string{"/repo/missing.tgz", "cannot download plugin b@1.2.0", "404 Not Found"}},
		{name: "bad digest", setup: lie(func(x *source.CatalogIndex) {
			x.Entries["b"][0].Digest = "sha256:" + strings.Repeat("0", 64)
		}), want: []string{"plugin b@1.2.0 has digest sha256:", "but the source announced sha256:0000000000"}},
		{name: "lying requires", setup: lie(func(x *source.CatalogIndex) { x.Entries["a"][0].Requires = nil }), want: []string{"plugin a@1.0.0 has spec.requires [b >=1.1], but the source listed it with []"}},
		{name: "duplicate", setup: lie(func(x *source.CatalogIndex) { x.Entries["b"] = append(x.Entries["b"], x.Entries["b"][0]) }), want: []string{"entries.b[1]", "plugin b@1.2.0 is listed twice in the index"}},
		{name: "bad entry", setup: lie(func(x *source.CatalogIndex) { x.Entries["b"][0].Digest = "md5:x" }), want: []string{"entries.b[0]", `digest "md5:x" is not sha256`}},
		{name: "not an index", setup: lie(func(x *source.CatalogIndex) { x.Kind = "IndexFile" }), want: []string{"not a plugin catalog index"}},
		{name: "tampered archive", setup: func(c *catalog) { c.ps[2].data = c.ps[2].data[:len(c.ps[2].data)/2] }, want: []string{"cannot unpack plugin b@1.2.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCatalog(t)
			tc.setup(c)
			srv := httptest.NewServer(c)
			defer srv.Close()
			start := time.Now()
			_, msg := fetchAll(t, source.HTTPCatalog(source.OriginCatalog, srv.URL+"/repo/index.yaml", source.HTTPOptions{Timeout: tc.timeout}))
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("diagnostics %q\nlack %q", msg, w)
				}
			}
			if tc.timeout > 0 && time.Since(start) > time.Second {
				t.Errorf("the timeout did not bound the request: %v", time.Since(start))
			}
		})
	}
}

// TestCacheCorruptedEntryIsRefetched corrupts a cached archive on disk: the next
// fetch detects it and downloads again.
func TestCacheCorruptedEntryIsRefetched(t *testing.T) {
	c := newCatalog(t)
	srv := httptest.NewServer(c)
	defer srv.Close()
	cache := &source.Cache{Dir: t.TempDir()}
	src := source.HTTPCatalog(source.OriginCatalog, srv.URL+"/repo/index.yaml", source.HTTPOptions{Cache: cache})
	if _, msg := fetchAll(t, src); msg != "" {
		t.Fatal(msg)
	}
	entries, _ := filepath.Glob(filepath.Join(cache.Dir, "sha256", "*.tgz"))
	if len(entries) != 3 {
		t.Fatalf("%d cache entries, want 3", len(entries))
	}
	// Another valid archive under the wrong digest, and garbage.
	other, _ := os.ReadFile(entries[1])
	_ = os.WriteFile(entries[0], other, 0o644)
	_ = os.WriteFile(entries[2], []byte("garbage"), 0o644)
	before := c.hits.Load()
	if _, msg := fetchAll(t, src); msg != "" {
		t.Fatal(msg)
	}
	if got := c.hits.Load() - before; got != 2 {
		t.Fatalf("%d downloads after corrupting 2 cache entries", got)
	}
}
