package source_test

import (
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/kubeplug/kubeplug/pkg/source"
)

// TestHelmOCIRepository: a type: helm source on an OCI prefix lists every
// chart repository under it and each tag that is a version as a plugin
// version; one on a chart's repository lists that chart; Fetch makes the
// chart's package, a required cosign signature is checked, and with the
// registry down a locked version is listed from the cache.
func TestHelmOCIRepository(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	push := func(repo, name, version, tag string) {
		tgz := chartTgz(t, map[string]string{
			name + "/Chart.yaml":        "apiVersion: v2\nname: " + name + "\nversion: " + version + "\nkubeVersion: '>=1.30.0-0'\n",
			name + "/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\n",
		})
		pushChart(t, host+"/"+repo+":"+tag, tgz)
	}
	push("charts/web", "web", "1.0.0", "1.0.0")
	push("charts/web", "web", "1.1.0", "1.1.0")
	push("charts/web", "web", "2.0.0+build.1", "2.0.0_build.1")
	push("charts/web", "web", "1.1.0", "latest")
	push("charts/db", "db", "0.1.0", "0.1.0")
	push("charts/deeper/x", "x", "1.0.0", "1.0.0")
	push("other/y", "y", "1.0.0", "1.0.0")

	ids := func(vs []*source.Version) string {
		var out []string
		for _, v := range vs {
			out = append(out, v.ID())
		}
		return strings.Join(out, " ")
	}
	cache := &source.Cache{Dir: t.TempDir()}
	prefix := source.HelmOCIRepository(source.OriginCatalog, "oci://"+host+"/charts", source.HTTPOptions{Cache: cache})
	vs, l := prefix.List(t.Context())
	if l.HasFatal() {
		t.Fatal(l)
	}
	if got, want := ids(vs), "db@0.1.0 web@2.0.0+build.1 web@1.1.0 web@1.0.0"; got != want {
		t.Fatalf("listed %q, want %q", got, want)
	}
	one := source.HelmOCIRepository(source.OriginCatalog, "oci://"+host+"/charts/web", source.HTTPOptions{Cache: cache})
	vs, l = one.List(t.Context())
	if got, want := ids(vs), "web@2.0.0+build.1 web@1.1.0 web@1.0.0"; got != want || l.HasFatal() {
		t.Fatalf("listed %q (%v), want %q", got, l, want)
	}

	pkg, l := one.Fetch(t.Context(), vs[1])
	if pkg == nil || l.HasFatal() {
		t.Fatalf("fetch: %v", l)
	}
	h := pkg.Manifest.Spec.Contributes.Kubernetes.HelmReleases
	if pkg.Name != "web" || pkg.Manifest.Metadata.Version != "1.1.0" || len(h) != 1 || h[0].Chart != source.HelmChartFile || h[0].Namespace != "web" {
		t.Fatalf("package %s %s, releases %+v", pkg.Name, pkg.Manifest.Metadata.Version, h)
	}

	_, pub := keyPair(t, t.TempDir(), "cosign")
	signed := source.HelmOCIRepository(source.OriginCatalog, "oci://"+host+"/charts/web", source.HTTPOptions{SignatureKeys: []string{pub}, SignatureRequired: true})
	vs2, _ := signed.List(t.Context())
	if _, l := signed.Fetch(t.Context(), vs2[1]); !l.HasFatal() || !strings.Contains(l.String(), "chart web 1.1.0 from oci://"+host+"/charts/web is not signed: the source requires a cosign signature by "+pub) {
		t.Fatalf("unsigned chart under a required signature: %q", l)
	}

	none := source.HelmOCIRepository(source.OriginCatalog, "oci://"+host+"/nothing", source.HTTPOptions{})
	if vs, l := none.List(t.Context()); len(vs) != 0 || !strings.Contains(l.String(), "cannot list Helm charts: oci://"+host+"/nothing is not a chart's repository") {
		t.Fatalf("an empty prefix: %v %q", vs, l)
	}

	srv.Close()
	locked := source.HelmOCIRepository(source.OriginCatalog, "oci://"+host+"/charts/web", source.HTTPOptions{Cache: cache, Pinned: []string{pkg.Digest}})
	vs, l = locked.List(t.Context())
	if got := ids(vs); got != "web@1.1.0" || l.HasFatal() || !strings.Contains(l.String(), "listing the 1 locked chart version(s) found in the cache") {
		t.Fatalf("registry down, locked: listed %q, %q", got, l)
	}
	got, l := locked.Fetch(t.Context(), vs[0])
	if got == nil || l.HasFatal() || got.Digest != pkg.Digest {
		t.Fatalf("offline fetch: %v %v", got, l)
	}
}
