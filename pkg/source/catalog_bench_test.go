package source_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/resolve"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// bigIndex is a catalog index of plugins × versions, plugin i requiring plugin i/2.
func bigIndex(plugins, versions int) []byte {
	x := source.CatalogIndex{APIVersion: source.IndexAPIVersion, Kind: source.IndexKind, Entries: map[string][]source.CatalogEntry{}}
	for i := range plugins {
		name := fmt.Sprintf("p%05d", i)
		var req []v1alpha1.Dependency
		if i > 0 {
			req = []v1alpha1.Dependency{{Name: fmt.Sprintf("p%05d", i/2), Version: ">=1.0"}}
		}
		for v := range versions {
			x.Entries[name] = append(x.Entries[name], source.CatalogEntry{
				Version: fmt.Sprintf("1.%d.0", versions-1-v), Requires: req, KubernetesVersion: ">=1.30.0-0",
				Digest: "sha256:" + strings.Repeat("ab", 32), URLs: []string{fmt.Sprintf("%s-1.%d.0.tgz", name, v)},
			})
		}
	}
	b, _ := yaml.Marshal(x)
	return b
}

// bigIndexOnce is the 10,000 × 10 index as JSON: a YAML index is limited to
// source.MaxYAMLIndexSize, which this is past.
var bigIndexOnce = sync.OnceValue(func() []byte {
	y, err := yaml.YAMLToJSON(bigIndex(10000, 10))
	if err != nil {
		panic(err)
	}
	return y
})

// BenchmarkResolveHTTPIndex resolves 200 plugins against a 10,000 × 10 HTTP index
// once it is fetched: the index is listed once, each iteration resolves.
func BenchmarkResolveHTTPIndex(b *testing.B) {
	data := bigIndexOnce()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(data) }))
	defer srv.Close()
	idx, l := source.List(context.Background(), source.HTTPCatalog(source.OriginCatalog, srv.URL+"/index.yaml", source.HTTPOptions{}))
	if l.HasFatal() {
		b.Fatal(l)
	}
	req := resolve.Request{KubernetesVersion: semver.MustParse("1.36.3")}
	for i := range 200 {
		req.Enabled = append(req.Enabled, resolve.Requirement{Name: fmt.Sprintf("p%05d", i*50)})
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := resolve.Resolve(context.Background(), catalogOf(idx), req)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Plugins) < 200 {
			b.Fatalf("resolved %d plugins", len(res.Plugins))
		}
	}
}

// BenchmarkListHTTPIndex fetches and decodes the 10,000 × 10 index.
func BenchmarkListHTTPIndex(b *testing.B) {
	data := bigIndexOnce()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(data) }))
	defer srv.Close()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, l := source.List(context.Background(), source.HTTPCatalog(source.OriginCatalog, srv.URL+"/index.yaml", source.HTTPOptions{})); l.HasFatal() {
			b.Fatal(l)
		}
	}
}

// catalogOf adapts an Index to the resolver, as the engine does.
func catalogOf(idx *source.Index) resolve.Catalog {
	var cache sync.Map
	return resolve.CatalogFunc(func(name string) []*resolve.Package {
		if v, ok := cache.Load(name); ok {
			return v.([]*resolve.Package)
		}
		var out []*resolve.Package
		for _, v := range idx.Versions(name) {
			rp := &resolve.Package{Name: v.Name, Version: v.Version, KubernetesVersion: v.KubernetesVersion, Source: v}
			for _, r := range v.Requires {
				rp.Requires = append(rp.Requires, resolve.Requirement{Name: r.Name, Constraint: r.Constraint})
			}
			out = append(out, rp)
		}
		v, _ := cache.LoadOrStore(name, out)
		return v.([]*resolve.Package)
	})
}

// BenchmarkDecodeIndex decodes a 1,500 × 10 index (under the YAML limit) as
// YAML and as JSON.
func BenchmarkDecodeIndex(b *testing.B) {
	data := bigIndex(1500, 10)
	x, err := source.DecodeIndex(data)
	if err != nil {
		b.Fatal(err)
	}
	js, err := json.Marshal(x)
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"yaml", data}, {"json", js}} {
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(f.data)))
			for b.Loop() {
				if _, err := source.DecodeIndex(f.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
