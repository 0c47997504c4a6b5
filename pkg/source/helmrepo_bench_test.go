package source_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/source"
)

// helmIndex10k is a Helm repository's index.yaml with 10,000 versions of chart
// web (as `helm repo index` writes entries: name, version, kubeVersion,
// digest, urls, created), every one pointing at the same archive.
func helmIndex10k(tb testing.TB) ([]byte, []byte) {
	tgz := chartTgz(tb, map[string]string{
		"web/Chart.yaml":        "apiVersion: v2\nname: web\nversion: 99.99.99\n",
		"web/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
	})
	var b strings.Builder
	b.WriteString("apiVersion: v1\nentries:\n  web:\n")
	for i := range 10000 {
		v := fmt.Sprintf("%d.%d.%d", i/1000, (i/10)%100, i%10)
		if i == 9999 {
			v = "99.99.99"
		}
		fmt.Fprintf(&b, "    - apiVersion: v2\n      name: web\n      version: %s\n      kubeVersion: '>=1.23.0-0'\n      created: \"2026-01-01T00:00:00Z\"\n      description: a web server\n      digest: %s\n      urls: [web-%s.tgz]\n", v, sum(tgz), v)
	}
	return []byte(b.String()), tgz
}

// BenchmarkHelmRepository10000 resolves a chart version constraint against a
// loopback Helm repository whose index.yaml lists 10,000 versions of one
// chart, and fetches the version picked (archive downloaded, digest and
// Chart.yaml checked), as a chart by reference is on every run without a warm
// cache (the type: helm source lists all 10,000 and fetches the highest); requests/op counts the HTTP requests the repository served.
//
//	go test ./pkg/source/ -run '^$' -bench BenchmarkHelmRepository10000 -benchtime 20x
func BenchmarkHelmRepository10000(b *testing.B) {
	index, tgz := helmIndex10k(b)
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.URL.Path == "/index.yaml" {
			_, _ = w.Write(index)
			return
		}
		_, _ = w.Write(tgz)
	}))
	defer srv.Close()
	b.Run("chart-by-reference", func(b *testing.B) {
		requests.Store(0)
		b.SetBytes(int64(len(index)))
		for b.Loop() {
			f := &source.ChartFetcher{}
			ch, err := f.Fetch(b.Context(), source.ChartRef{Repo: srv.URL, Chart: "web", Version: ">=99"}, nil)
			if err != nil {
				b.Fatal(err)
			}
			if ch.Version != "99.99.99" {
				b.Fatalf("picked %s", ch.Version)
			}
		}
		b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/op")
	})
	b.Run("type-helm-source", func(b *testing.B) {
		requests.Store(0)
		b.SetBytes(int64(len(index)))
		for b.Loop() {
			src := source.HelmRepository(source.OriginCatalog, srv.URL, source.HTTPOptions{})
			idx, l := source.List(b.Context(), src)
			if l.HasFatal() {
				b.Fatal(l)
			}
			vs := idx.Versions("web")
			if len(vs) != 10000 {
				b.Fatalf("listed %d versions", len(vs))
			}
			top := vs[0]
			for _, v := range vs {
				if v.Version.GreaterThan(top.Version) {
					top = v
				}
			}
			pkg, l := idx.Fetch(b.Context(), top)
			if pkg == nil || l.HasFatal() {
				b.Fatal(l)
			}
		}
		b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/op")
	})
}
