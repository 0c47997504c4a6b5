package action_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// TestOCIAndHTTPCatalogsLocked plans a cluster whose app comes from an OCI catalog
// and whose lib (required by app) from an HTTP catalog, locks it, and checks that a
// new app version pushed to the OCI catalog is refused by plan --locked naming the
// change, then planned as an upgrade once relocked.
func TestOCIAndHTTPCatalogsLocked(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx := context.Background()
	work, dist, staging := t.TempDir(), t.TempDir(), t.TempDir()
	cfg := &action.Config{NoBuiltin: true}
	pkg := func(out, name, version, spec string) string {
		p := action.NewPackage(cfg)
		p.Output = filepath.Join(out, name+"-"+version+".tgz")
		if _, l := p.Run(ctx, writePlugin(t, work, name, version, spec)); l.HasFatal() {
			t.Fatal(l)
		}
		return p.Output
	}
	pkg(dist, "lib", "1.0.0", `{}`)
	if _, _, l := action.NewCatalogIndex(cfg).Run(ctx, dist); l.HasFatal() {
		t.Fatal(l)
	}
	web := httptest.NewServer(http.FileServer(http.Dir(dist)))
	defer web.Close()
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	prefix := "oci://" + strings.TrimPrefix(reg.URL, "http://") + "/cat"
	c, err := oci.New(oci.Options{PlainHTTP: true, RegistryConfig: filepath.Join(t.TempDir(), "config.json")})
	if err != nil {
		t.Fatal(err)
	}
	push := func(version string) {
		if _, err := source.PushToCatalog(ctx, c, pkg(staging, "app", version, `{requires: [{name: lib, version: "^1"}]}`), prefix); err != nil {
			t.Fatal(err)
		}
	}
	push("1.0.0")

	file := filepath.Join(work, "cluster.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: cat}
spec:
  kubernetesVersion: 1.33.0
  provider: {local: {}}
  plugins:
    sources:
      - catalog: %s/index.yaml
      - catalog: %s
    enabled:
      - name: app
`, web.URL, prefix), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := func(locked bool) ([]string, string) {
		t.Helper()
		c := *cfg
		c.Locked = locked
		doc, l := action.NewPlan(&c).Run(ctx, load(t, file))
		if l.HasFatal() || doc == nil {
			return nil, l.String()
		}
		var got []string
		for _, p := range doc.Plugins {
			got = append(got, p.Name+"@"+p.Version)
		}
		slices.Sort(got)
		return got, ""
	}
	if got, msg := plan(false); !slices.Equal(got, []string{"app@1.0.0", "lib@1.0.0"}) {
		t.Fatalf("planned %v %s", got, msg)
	}
	if res, l := action.NewLock(cfg).Run(ctx, load(t, file)); res == nil {
		t.Fatalf("lock: %v", l)
	}
	if got, msg := plan(true); msg != "" || len(got) != 2 {
		t.Fatalf("plan --locked: %v %s", got, msg)
	}

	// A new version: the lock holds app at 1.0.0 until it is updated.
	push("1.1.0")
	if got, msg := plan(true); !slices.Equal(got, []string{"app@1.0.0", "lib@1.0.0"}) {
		t.Fatalf("plan --locked after a new version: %v %s", got, msg)
	}
	relock := action.NewLock(cfg)
	relock.Update = []string{"app"}
	if res, l := relock.Run(ctx, load(t, file)); res == nil || len(res.Changes) != 1 {
		t.Fatalf("lock --update app: %v %v", res, l)
	}
	if got, msg := plan(true); !slices.Equal(got, []string{"app@1.1.0", "lib@1.0.0"}) {
		t.Fatalf("after relocking, planned %v %s", got, msg)
	}
}
