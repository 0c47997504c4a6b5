package source_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/source"
)

func ociRegistry(t *testing.T) (string, *oci.Client) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	c, err := oci.New(oci.Options{PlainHTTP: true, RegistryConfig: filepath.Join(t.TempDir(), "config.json")})
	if err != nil {
		t.Fatal(err)
	}
	return "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/catalog", c
}

func pushAll(t *testing.T, c *oci.Client, prefix string, ps ...published) {
	t.Helper()
	dir := t.TempDir()
	for _, p := range ps {
		f := filepath.Join(dir, p.name+"-"+p.entry.Version+".tgz")
		if err := os.WriteFile(f, p.data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := source.PushToCatalog(context.Background(), c, f, prefix); err != nil {
			t.Fatal(err)
		}
	}
}

func ids(t *testing.T, src source.Source) []string {
	t.Helper()
	pkgs, errs := fetchAll(t, src)
	if errs != "" {
		t.Fatal(errs)
	}
	var out []string
	for _, p := range pkgs {
		out = append(out, p.ID())
	}
	slices.Sort(out)
	return out
}

// TestOCICatalog publishes plugins to a loopback registry with PushToCatalog and reads
// them back through the catalog's index; a version published later is listed without
// anything else changing.
func TestOCICatalog(t *testing.T) {
	prefix, c := ociRegistry(t)
	cat := newCatalog(t)
	pushAll(t, c, prefix, cat.ps...)
	cache := &source.Cache{Dir: t.TempDir()}
	src := source.OpenCatalog(source.OriginCatalog, prefix, source.HTTPOptions{Cache: cache})
	if got, want := ids(t, src), []string{"a@1.0.0", "a@1.1.0", "b@1.2.0"}; !slices.Equal(got, want) {
		t.Fatalf("fetched %v, want %v", got, want)
	}
	pushAll(t, c, prefix, publish(t, "b", "1.3.0", `{kubernetesVersion: ">=1.30"}`))
	if got, want := ids(t, src), []string{"a@1.0.0", "a@1.1.0", "b@1.2.0", "b@1.3.0"}; !slices.Equal(got, want) {
		t.Fatalf("after publishing b@1.3.0: fetched %v, want %v", got, want)
	}
}

// TestOCICatalogRefuses checks that an index entry whose digest disagrees with the
// package is refused naming both digests, and a prefix without an index is reported.
func TestOCICatalogRefuses(t *testing.T) {
	prefix, c := ociRegistry(t)
	src := source.OpenCatalog(source.OriginCatalog, prefix, source.HTTPOptions{})
	if _, errs := fetchAll(t, src); !strings.Contains(errs, "has no index") {
		t.Fatalf("empty prefix: %q", errs)
	}
	p := publish(t, "a", "1.0.0", `{}`)
	pushAll(t, c, prefix, p)
	data, _, err := c.FetchIndex(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	x, err := source.DecodeIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	const wrong = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	x.Entries["a"][0].Digest = wrong
	b, _ := json.Marshal(x)
	if _, err := c.PushIndex(context.Background(), prefix, b); err != nil {
		t.Fatal(err)
	}
	_, errs := fetchAll(t, src)
	if !strings.Contains(errs, wrong) || !strings.Contains(errs, p.entry.Digest) {
		t.Fatalf("tampered index: %q does not name both digests", errs)
	}
	if err := source.CheckCatalogURL(prefix + ":1.0"); err == nil {
		t.Fatal("a tagged OCI catalog was accepted")
	}
}

// TestRebuildOCIIndex restores an index that lost its entries from the registry's tags.
func TestRebuildOCIIndex(t *testing.T) {
	prefix, c := ociRegistry(t)
	cat := newCatalog(t)
	pushAll(t, c, prefix, cat.ps...)
	ctx := context.Background()
	want, _, err := c.FetchIndex(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	lost, _ := json.Marshal(source.CatalogIndex{APIVersion: source.IndexAPIVersion, Kind: source.IndexKind, Entries: map[string][]source.CatalogEntry{}})
	if _, err := c.PushIndex(ctx, prefix, lost); err != nil {
		t.Fatal(err)
	}
	x, err := source.RebuildOCIIndex(ctx, c, prefix, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(x)
	if string(got) != string(want) {
		t.Fatalf("rebuilt index\n%s\nwant\n%s", got, want)
	}
}
