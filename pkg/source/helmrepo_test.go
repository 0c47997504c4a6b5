package source_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// chartTgz packs files (path -> content) as a gzipped tar, as helm package does.
func chartTgz(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// helmServer serves an index.yaml and archives by path.
func helmServer(t *testing.T, index string, files map[string][]byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/index.yaml" {
			_, _ = w.Write([]byte(index))
			return
		}
		if b, ok := files[strings.TrimPrefix(r.URL.Path, "/")]; ok {
			_, _ = w.Write(b)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestHelmRepositoryListsAndFetchesCharts(t *testing.T) {
	good := chartTgz(t, map[string]string{
		"web/Chart.yaml":          "apiVersion: v2\nname: web\nversion: 1.2.0\nkubeVersion: '>=1.30.0-0'\n",
		"web/templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
		"web/values.yaml":         "a: 1\n",
		"web/charts/.gitkeep":     "",
		"web/templates/NOTES.txt": "hi",
	})
	index := fmt.Sprintf(`apiVersion: v1
entries:
  web:
    - {name: web, version: 1.2.0, kubeVersion: ">=1.30.0-0", digest: %s, urls: [web-1.2.0.tgz]}
    - {name: web, version: 1.1.0, digest: %s, urls: [web-1.1.0.tgz]}
    - {name: web, version: not-semver, digest: %s, urls: [x.tgz]}
    - {name: web, version: 1.0.0, urls: [web-1.0.0.tgz]}
    - {name: web, version: 0.9.0, deprecated: true, digest: %s, urls: [web-0.9.0.tgz]}
  Bad_Name:
    - {version: 1.0.0, digest: %s, urls: [b.tgz]}
`, sum(good), sum(good), sum(good), sum(good), sum(good))
	srv := helmServer(t, index, map[string][]byte{"web-1.2.0.tgz": good, "web-1.1.0.tgz": good})
	src := source.HelmRepository(source.OriginCatalog, srv.URL, source.HTTPOptions{})
	vs, l := src.List(t.Context())
	var got []string
	for _, v := range vs {
		got = append(got, v.Name+"@"+v.Version.String())
	}
	if strings.Join(got, " ") != "web@1.2.0 web@1.1.0" {
		t.Errorf("listed %v, want web@1.2.0 web@1.1.0 (broken and deprecated left out)", got)
	}
	msgs := l.String()
	for _, want := range []string{
		`version "not-semver" is not a semantic version`,
		`chart web 1.0.0: digest "" is not 64 hex digits`,
		`chart name "Bad_Name" is not a plugin name`,
	} {
		if !strings.Contains(msgs, want) {
			t.Errorf("diagnostics %q lack %q", msgs, want)
		}
	}
	if vs[0].KubernetesVersion == nil || vs[0].KubernetesVersion.String() != ">=1.30.0-0" {
		t.Errorf("kubernetesVersion = %v", vs[0].KubernetesVersion)
	}

	pkg, fl := src.Fetch(t.Context(), vs[0])
	if fl.HasFatal() || pkg == nil {
		t.Fatalf("fetch: %v", fl)
	}
	if pkg.Name != "web" || pkg.Manifest.Metadata.Version != "1.2.0" || pkg.Manifest.Spec.KubernetesVersion != ">=1.30.0-0" {
		t.Errorf("package %s %s kubernetesVersion %q", pkg.Name, pkg.Manifest.Metadata.Version, pkg.Manifest.Spec.KubernetesVersion)
	}
	h := pkg.Manifest.Spec.Contributes.Kubernetes.HelmReleases
	if len(h) != 1 || h[0].Chart != source.HelmChartFile || h[0].Namespace != "web" {
		t.Errorf("helm releases = %+v", h)
	}

	// The version 1.1.0 entry points at an archive holding 1.2.0: refused.
	if _, fl := src.Fetch(t.Context(), vs[1]); !strings.Contains(fl.String(), "the archive holds chart web 1.2.0, not web 1.1.0") {
		t.Errorf("a mislabelled archive: %v", fl)
	}
}

func TestHelmRepositoryHostile(t *testing.T) {
	traversal := chartTgz(t, map[string]string{"web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n", "web/../../evil": "x"})
	real := chartTgz(t, map[string]string{"web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 2.0.0\n"})
	index := fmt.Sprintf(`apiVersion: v1
entries:
  web:
    - {name: web, version: 1.0.0, digest: %s, urls: [web-1.0.0.tgz]}
    - {name: web, version: 2.0.0, digest: "%s", urls: [web-2.0.0.tgz]}
    - {name: web, version: 3.0.0, digest: %s, urls: ["https://elsewhere.example/../x.tgz"]}
`, sum(traversal), strings.Repeat("0", 64), sum(real))
	srv := helmServer(t, index, map[string][]byte{"web-1.0.0.tgz": traversal, "web-2.0.0.tgz": real})
	src := source.HelmRepository(source.OriginCatalog, srv.URL+"/index.yaml", source.HTTPOptions{})
	vs, _ := src.List(t.Context())
	byVersion := map[string]*source.Version{}
	for _, v := range vs {
		byVersion[v.Version.String()] = v
	}
	for version, want := range map[string]string{
		"1.0.0": "cannot unpack the chart archive",
		"2.0.0": "the archive's sha256 is " + sum(real) + ", but the index gives " + strings.Repeat("0", 64),
	} {
		v := byVersion[version]
		if v == nil {
			t.Fatalf("%s not listed", version)
		}
		pkg, l := src.Fetch(t.Context(), v)
		if pkg != nil || !strings.Contains(l.String(), want) {
			t.Errorf("web %s: package %v, diagnostics %q, want %q", version, pkg != nil, l.String(), want)
		}
	}

	// A repository that is down, and one whose index claims to be 1 GB.
	srv.Close()
	if _, l := src.List(t.Context()); !strings.Contains(l.String(), "cannot read the Helm repository index") {
		t.Errorf("down: %v", l)
	}
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1073741824")
		_, _ = w.Write([]byte("apiVersion: v1\n"))
	}))
	t.Cleanup(huge.Close)
	_, l := source.HelmRepository(source.OriginCatalog, huge.URL, source.HTTPOptions{}).List(t.Context())
	if !strings.Contains(l.String(), "more than the 64 MiB limit") {
		t.Errorf("1 GB index: %v", l)
	}
	// Not a Helm index at all.
	other := helmServer(t, "apiVersion: kubeplug.dev/v1alpha1\nkind: PluginIndex\n", nil)
	if _, l := source.HelmRepository(plugin.Origin{Name: "x", Rank: 1}, other.URL, source.HTTPOptions{}).List(t.Context()); !strings.Contains(l.String(), "not a Helm repository index") {
		t.Errorf("a kubeplug index: %v", l)
	}
}

// TestHelmRepositoryDownListsLockedFromCache: with the repository down, a
// chart version a lock pins (its package digest) and fetched before is listed
// and fetched from the cache alone, with a warning; without a pin the error
// names the repository's URL.
func TestHelmRepositoryDownListsLockedFromCache(t *testing.T) {
	tgz := chartTgz(t, map[string]string{
		"web/Chart.yaml":        "apiVersion: v2\nname: web\nversion: 1.2.0\nkubeVersion: '>=1.30.0-0'\n", // the index says more
		"web/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
	})
	index := fmt.Sprintf("apiVersion: v1\nentries:\n  web:\n    - {name: web, version: 1.2.0, description: a web, kubeVersion: \">=1.30.0-0\", digest: %s, urls: [web-1.2.0.tgz]}\n", sum(tgz))
	srv := helmServer(t, index, map[string][]byte{"web-1.2.0.tgz": tgz})
	cache := &source.Cache{Dir: t.TempDir()}
	online := source.HelmRepository(source.OriginCatalog, srv.URL, source.HTTPOptions{Cache: cache})
	vs, l := online.List(t.Context())
	if len(vs) != 1 || l.HasFatal() {
		t.Fatalf("listed %v: %v", vs, l)
	}
	pkg, l := online.Fetch(t.Context(), vs[0])
	if pkg == nil || l.HasFatal() {
		t.Fatalf("fetch: %v", l)
	}
	url := srv.URL
	srv.Close() // the repository is down from here on

	unpinned := source.HelmRepository(source.OriginCatalog, url, source.HTTPOptions{Cache: cache})
	if vs, l := unpinned.List(t.Context()); len(vs) != 0 || !l.HasFatal() || !strings.Contains(l.String(), url+"/index.yaml") ||
		!strings.Contains(l.String(), "cannot read the Helm repository index") {
		t.Fatalf("without a lock: listed %v, %q", vs, l)
	}

	locked := source.HelmRepository(source.OriginCatalog, url, source.HTTPOptions{Cache: cache, Pinned: []string{pkg.Digest, "sha256:" + strings.Repeat("0", 64)}})
	vs, l = locked.List(t.Context())
	if len(vs) != 1 || l.HasFatal() || !strings.Contains(l.String(), "listing the 1 locked chart version(s) found in the cache") {
		t.Fatalf("with a lock: listed %v, %q", vs, l)
	}
	v := vs[0]
	if v.Name != "web" || v.Version.String() != "1.2.0" || v.KubernetesVersion.String() != ">=1.30.0-0" || v.Digest != pkg.Digest {
		t.Fatalf("listed %s %s %v %s", v.Name, v.Version, v.KubernetesVersion, v.Digest)
	}
	got, l := locked.Fetch(t.Context(), v)
	if got == nil || l.HasFatal() {
		t.Fatalf("offline fetch: %v", l)
	}
	if got.Digest != pkg.Digest {
		t.Fatalf("offline package %s, online %s", got.Digest, pkg.Digest)
	}

	// With a keyring the provenance is checked on every use: no offline listing.
	keyring := source.HelmRepository(source.OriginCatalog, url, source.HTTPOptions{Cache: cache, Pinned: []string{pkg.Digest}, Keyring: "keys.gpg"})
	if vs, l := keyring.List(t.Context()); len(vs) != 0 || !l.HasFatal() {
		t.Fatalf("with a keyring: listed %v, %q", vs, l)
	}
}
