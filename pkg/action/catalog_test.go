package action_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// writePlugin writes a minimal plugin package and returns its directory.
func writePlugin(t *testing.T, root, name, version, spec string) string {
	t.Helper()
	dir := filepath.Join(root, name+"-"+version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := fmt.Sprintf("apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: %s, version: %s}\nspec: %s\n", name, version, spec)
	if err := os.WriteFile(filepath.Join(dir, "plugin.yaml"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCatalogFromClusterFile packages plugins, indexes them, serves the directory over
// HTTP and plans a cluster whose plugins come from the catalog, with requires across
// packages; a version published later is picked up without anything else changing.
func TestCatalogFromClusterFile(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx := context.Background()
	work, dist := t.TempDir(), t.TempDir()
	cfg := &action.Config{NoBuiltin: true}
	pkg := func(name, version, spec string) {
		p := action.NewPackage(cfg)
		p.Output = filepath.Join(dist, name+"-"+version+".tgz")
		if _, l := p.Run(ctx, writePlugin(t, work, name, version, spec)); l.HasFatal() {
			t.Fatal(l)
		}
	}
	index := func() {
		if _, _, l := action.NewCatalogIndex(cfg).Run(ctx, dist); l.HasFatal() {
			t.Fatal(l)
		}
	}
	pkg("app", "1.0.0", `{requires: [{name: lib, version: "^1"}]}`)
	pkg("lib", "1.0.0", `{}`)
	pkg("lib", "2.0.0", `{}`)
	index()
	srv := httptest.NewServer(http.FileServer(http.Dir(dist)))
	defer srv.Close()

	file := filepath.Join(work, "cluster.yaml")
	cluster := fmt.Sprintf(`apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: cat}
spec:
  kubernetesVersion: 1.33.0
  provider: {local: {}}
  plugins:
    sources:
      - catalog: %s/index.yaml
    enabled:
      - name: app
`, srv.URL)
	if err := os.WriteFile(file, []byte(cluster), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := func() string {
		t.Helper()
		doc, l := action.NewPlan(cfg).Run(ctx, load(t, file))
		if l.HasFatal() || doc == nil {
			t.Fatalf("plan: %v", l)
		}
		var got []string
		for _, p := range doc.Plugins {
			got = append(got, p.Name+"@"+p.Version)
		}
		return strings.Join(got, " ")
	}
	if got := plan(); got != "lib@1.0.0 app@1.0.0" && got != "app@1.0.0 lib@1.0.0" {
		t.Fatalf("planned %s", got)
	}
	pkg("lib", "1.1.0", `{}`)
	index()
	if got := plan(); got != "lib@1.1.0 app@1.0.0" && got != "app@1.0.0 lib@1.1.0" {
		t.Fatalf("after publishing lib 1.1.0, planned %s", got)
	}

	// With a lock file and a warm cache, the catalog may be unreachable.
	if res, l := action.NewLock(cfg).Run(ctx, load(t, file)); res == nil {
		t.Fatalf("lock: %v", l)
	}
	srv.Close()
	if got := plan(); got != "lib@1.1.0 app@1.0.0" && got != "app@1.0.0 lib@1.1.0" {
		t.Fatalf("offline, planned %s", got)
	}
	// Without the lock file, an unreachable catalog is an error naming it.
	if err := os.Remove(filepath.Join(work, "kubeplug.lock")); err != nil {
		t.Fatal(err)
	}
	if _, l := action.NewPlan(cfg).Run(ctx, load(t, file)); !l.HasFatal() || !strings.Contains(l.String(), srv.URL+"/index.yaml: cannot read the catalog index") {
		t.Fatalf("offline without a lock file: %v", l)
	}
}

// TestCatalogIndexRefusesDuplicates checks two archives of one name and version are
// an error naming both.
func TestCatalogIndexRefusesDuplicates(t *testing.T) {
	ctx := context.Background()
	work, dist := t.TempDir(), t.TempDir()
	cfg := &action.Config{NoBuiltin: true}
	dir := writePlugin(t, work, "lib", "1.0.0", `{}`)
	for _, f := range []string{"a.tgz", "b.tgz"} {
		p := action.NewPackage(cfg)
		p.Output = filepath.Join(dist, f)
		if _, l := p.Run(ctx, dir); l.HasFatal() {
			t.Fatal(l)
		}
	}
	_, _, l := action.NewCatalogIndex(cfg).Run(ctx, dist)
	if !l.HasFatal() || !strings.Contains(l.String(), "plugin lib@1.0.0 is also in") || !strings.Contains(l.String(), "a.tgz") || !strings.Contains(l.String(), "b.tgz") {
		t.Fatalf("diagnostics: %v", l)
	}
	if _, err := os.Stat(filepath.Join(dist, "index.yaml")); !os.IsNotExist(err) {
		t.Fatal("an index was written despite the error")
	}
}

// TestCatalogIndexJSON: an output named .json is a JSON index with the same entries.
func TestCatalogIndexJSON(t *testing.T) {
	ctx := context.Background()
	work, dist := t.TempDir(), t.TempDir()
	cfg := &action.Config{NoBuiltin: true}
	p := action.NewPackage(cfg)
	p.Output = filepath.Join(dist, "lib-1.0.0.tgz")
	if _, l := p.Run(ctx, writePlugin(t, work, "lib", "1.0.0", `{}`)); l.HasFatal() {
		t.Fatal(l)
	}
	idx := action.NewCatalogIndex(cfg)
	idx.Output = filepath.Join(dist, "index.json")
	want, _, l := idx.Run(ctx, dist)
	if l.HasFatal() {
		t.Fatal(l)
	}
	data, err := os.ReadFile(idx.Output)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(data) {
		t.Fatalf("index.json is not JSON:\n%s", data)
	}
	got, err := source.DecodeIndex(data)
	if err != nil || len(got.Entries["lib"]) != 1 || got.Entries["lib"][0].Digest != want.Entries["lib"][0].Digest {
		t.Fatalf("decoded %+v (%v), want %+v", got, err, want)
	}
}
