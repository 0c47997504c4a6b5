package source_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/source"
)

// TestChartFetcherRefuses checks the faults of a chart by reference in a Helm
// repository: each is an error naming the chart, the version and the source.
func TestChartFetcherRefuses(t *testing.T) {
	good := chartTgz(t, map[string]string{"web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n"})
	traversal := chartTgz(t, map[string]string{"web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.1.0\n", "web/../../etc/passwd": "x"})
	index := func(entries ...string) string {
		return "apiVersion: v1\nentries:\n  web:\n" + strings.Join(entries, "")
	}
	entry := func(version, digest, file string) string {
		return fmt.Sprintf("    - {name: web, version: %s, digest: \"%s\", urls: [%s]}\n", version, digest, file)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for _, tc := range []struct {
		name, index string
		files       map[string][]byte
		repo        string // default: the test server
		version     string
		want        string
	}{
		{name: "down", repo: down.URL, version: "1.x", want: "chart web 1.x from " + down.URL + ": " + down.URL + "/index.yaml: cannot read the Helm repository index"},
		{name: "no such chart", index: "apiVersion: v1\nentries: {}\n", version: "1.x", want: "the repository's index lists no chart web"},
		{name: "no matching version", index: index(entry("1.0.0", sum(good), "web-1.0.0.tgz")), files: map[string][]byte{"web-1.0.0.tgz": good},
			version: "2.x", want: "chart web 2.x from SERVER: no version of chart web in the repository's index meets 2.x (it lists 1.0.0)"},
		{name: "lying digest", index: index(entry("1.0.0", strings.Repeat("0", 64), "web-1.0.0.tgz")), files: map[string][]byte{"web-1.0.0.tgz": good},
			version: "1.0.0", want: "chart web 1.0.0 from SERVER/index.yaml: the archive's sha256 is " + sum(good) + ", but the index gives " + strings.Repeat("0", 64) + ": refused"},
		{name: "traversal", index: index(entry("1.1.0", sum(traversal), "web-1.1.0.tgz")), files: map[string][]byte{"web-1.1.0.tgz": traversal},
			version: "1.x", want: "chart web 1.1.0 from SERVER: cannot unpack the chart archive"},
		{name: "archive missing", index: index(entry("1.0.0", sum(good), "web-1.0.0.tgz")), version: "1.x",
			want: "cannot download chart web 1.0.0 from SERVER/index.yaml: GET SERVER/web-1.0.0.tgz: 404 Not Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := helmServer(t, tc.index, tc.files)
			repo := tc.repo
			if repo == "" {
				repo = srv.URL
			}
			f := &source.ChartFetcher{Cache: &source.Cache{Dir: t.TempDir()}}
			_, err := f.Fetch(context.Background(), source.ChartRef{Repo: repo, Chart: "web", Version: tc.version}, nil)
			want := strings.ReplaceAll(tc.want, "SERVER", srv.URL)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want %q", err, want)
			}
		})
	}
}

// TestChartFetcherHugeIndex: an index claiming 1 GB, or streaming past the
// limit without saying, is refused naming the chart, not read whole.
func TestChartFetcherHugeIndex(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"claims 1 GB": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "1073741824")
			_, _ = w.Write([]byte("apiVersion: v1\n"))
		},
		"streams 65 MiB": func(w http.ResponseWriter, _ *http.Request) {
			chunk := []byte(strings.Repeat("# padding\n", 1<<16))
			for range 110 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			f := &source.ChartFetcher{Cache: &source.Cache{Dir: t.TempDir()}}
			_, err := f.Fetch(context.Background(), source.ChartRef{Repo: srv.URL, Chart: "web", Version: "1.x"}, nil)
			if err == nil || !strings.Contains(err.Error(), "chart web 1.x from "+srv.URL) || !strings.Contains(err.Error(), "more than the 64 MiB limit") {
				t.Fatalf("error %v", err)
			}
		})
	}
}

// TestChartFetcherPinnedFromCache checks that a pinned chart in the cache is
// used without the network, and that a cached archive that no longer has the
// pinned digest is not.
func TestChartFetcherPinnedFromCache(t *testing.T) {
	good := chartTgz(t, map[string]string{"web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n"})
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		if r.URL.Path == "/index.yaml" {
			_, _ = fmt.Fprintf(w, "apiVersion: v1\nentries:\n  web:\n    - {name: web, version: 1.0.0, digest: %s, urls: [web.tgz]}\n", sum(good))
			return
		}
		_, _ = w.Write(good)
	}))
	defer srv.Close()
	cache := &source.Cache{Dir: t.TempDir()}
	f := &source.ChartFetcher{Cache: cache}
	ref := source.ChartRef{Repo: srv.URL, Chart: "web", Version: "1.x"}
	ch, err := f.Fetch(context.Background(), ref, nil)
	if err != nil || ch.Cached || requests != 2 {
		t.Fatalf("first fetch: %+v %v, %d requests", ch, err, requests)
	}
	pin := &source.ChartPin{Version: ch.Version, Digest: ch.Digest}
	ch, err = f.Fetch(context.Background(), ref, pin)
	if err != nil || !ch.Cached || requests != 2 {
		t.Fatalf("pinned fetch: %+v %v, %d requests (want none)", ch, err, requests)
	}
	// A cache entry swapped on disk is not used.
	if err := cache.Put(pin.Digest, chartTgz(t, map[string]string{"web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\ndescription: swapped\n"})); err != nil {
		t.Fatal(err)
	}
	ch, err = f.Fetch(context.Background(), ref, pin)
	if err != nil || ch.Cached || ch.Digest != pin.Digest {
		t.Fatalf("fetch with a swapped cache entry: %+v %v", ch, err)
	}
}
