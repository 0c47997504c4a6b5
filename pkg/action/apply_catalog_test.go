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
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/source"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestApplySignedLockedFromCatalogs applies, to the test control plane, a cluster
// whose app comes signed from an OCI catalog that requires signatures and whose lib
// (required by app) comes from an HTTP catalog, locked. A new signed app version is
// refused by apply --locked until relocked, then applied as an upgrade; a version
// signed with an unknown key is refused with nothing applied.
func TestApplySignedLockedFromCatalogs(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx := context.Background()
	ns := testcluster.Namespace(t)
	sfx := fmt.Sprint(time.Now().UnixNano() % 1_000_000)
	app, lib := "capp-"+sfx, "clib-"+sfx
	work, dist, staging := t.TempDir(), t.TempDir(), t.TempDir()
	cfg := &action.Config{NoBuiltin: true}

	keygen := func(prefix string) string {
		k := &action.Keygen{Prefix: filepath.Join(work, prefix)}
		res, err := k.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res.PublicKey
	}
	trusted := keygen("vendor")
	keygen("stranger")

	// A plugin whose ConfigMap says its version.
	pkg := func(out, name, version, spec string) string {
		dir := writePlugin(t, work, name, version, `{contributes: {kubernetes: {manifests: [cm.yaml]}}, `+spec+`}`)
		cm := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s}\ndata: {version: %q}\n", name, ns, version)
		if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte(cm), 0o644); err != nil {
			t.Fatal(err)
		}
		p := action.NewPackage(cfg)
		p.Output = filepath.Join(out, name+"-"+version+".tgz")
		if _, l := p.Run(ctx, dir); l.HasFatal() {
			t.Fatal(l)
		}
		return p.Output
	}
	pkg(dist, lib, "1.0.0", `requires: []`)
	if _, _, l := action.NewCatalogIndex(cfg).Run(ctx, dist); l.HasFatal() {
		t.Fatal(l)
	}
	web := httptest.NewServer(http.FileServer(http.Dir(dist)))
	defer web.Close()
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	prefix := "oci://" + host + "/cat"
	c, err := oci.New(oci.Options{PlainHTTP: true, RegistryConfig: filepath.Join(t.TempDir(), "config.json")})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(version, key string) {
		t.Helper()
		archive := pkg(staging, app, version, `requires: [{name: `+lib+`, version: "^1"}]`)
		if _, err := source.PushToCatalog(ctx, c, archive, prefix); err != nil {
			t.Fatal(err)
		}
		s := &action.Sign{Key: filepath.Join(work, key+".key"), Push: prefix + "/" + app + ":" + version, Registry: c}
		if _, err := s.Run(ctx, archive); err != nil {
			t.Fatalf("sign %s %s: %v", app, version, err)
		}
	}
	publish("1.0.0", "vendor")

	file := filepath.Join(work, "cluster.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: signed}
spec:
  kubernetesVersion: 1.37.1
  plugins:
    sources:
      - catalog: %s/index.yaml
      - catalog: %s
        verify: {keys: [%s], required: true}
    enabled:
      - name: %s
`, web.URL, prefix, trusted, app), 0o644); err != nil {
		t.Fatal(err)
	}
	apply := func(locked bool) string {
		t.Helper()
		c := *cfg
		c.Locked, c.UpdateAll = locked, !locked
		a := action.NewApply(&c)
		a.Target.RESTConfig = testcluster.RESTConfig(t)
		a.Timeout = time.Minute
		_, l := a.Run(ctx, load(t, file))
		if l.HasFatal() {
			return l.String()
		}
		return ""
	}
	version := func(name string) string {
		cm, err := testcluster.Client(t).CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "absent"
		}
		return cm.Data["version"]
	}
	t.Cleanup(func() {
		u := action.NewUninstall(cfg)
		u.Target.RESTConfig = testcluster.RESTConfig(t)
		u.Cascade = true
		_, _ = u.Run(context.WithoutCancel(ctx), lib)
	})

	if res, l := action.NewLock(cfg).Run(ctx, load(t, file)); res == nil {
		t.Fatalf("lock: %v", l)
	}
	if msg := apply(true); msg != "" {
		t.Fatalf("apply --locked: %s", msg)
	}
	if a, b := version(app), version(lib); a != "1.0.0" || b != "1.0.0" {
		t.Fatalf("installed %s@%s and %s@%s, want both 1.0.0", app, a, lib, b)
	}

	// A new signed version: the lock holds the installed one; updated, an upgrade.
	publish("1.1.0", "vendor")
	if msg := apply(true); msg != "" {
		t.Fatalf("apply --locked after a new version: %q", msg)
	}
	if v := version(app); v != "1.0.0" {
		t.Fatalf("apply --locked of a pinned %s changed it to %s", app, v)
	}
	relock := action.NewLock(cfg)
	relock.Update = []string{app}
	if res, l := relock.Run(ctx, load(t, file)); res == nil {
		t.Fatalf("lock --update: %v", l)
	}
	if msg := apply(true); msg != "" {
		t.Fatalf("apply after relocking: %s", msg)
	}
	if v := version(app); v != "1.1.0" {
		t.Fatalf("%s is %s after the upgrade, want 1.1.0", app, v)
	}

	// A plain apply keeps the locked version; apply --update takes the new
	// one as an upgrade and pins it in the lock file, as go get does go.mod.
	publish("1.1.1", "vendor")
	c2 := *cfg
	a := action.NewApply(&c2)
	a.Target.RESTConfig = testcluster.RESTConfig(t)
	a.Timeout = time.Minute
	res, l := a.Run(ctx, load(t, file))
	if l.HasFatal() || res == nil || len(res.LockUpdated) != 0 || version(app) != "1.1.0" {
		t.Fatalf("apply of a locked plugin with a new version: %v %+v, %s", l, res, version(app))
	}
	c2.UpdateAll = true
	a = action.NewApply(&c2)
	a.Target.RESTConfig = testcluster.RESTConfig(t)
	a.Timeout = time.Minute
	res, l = a.Run(ctx, load(t, file))
	if l.HasFatal() || res == nil || len(res.LockUpdated) != 1 || !strings.Contains(res.LockUpdated[0], "1.1.1") {
		t.Fatalf("apply of a new version with a lock file: %v %+v", l, res)
	}
	if v := version(app); v != "1.1.1" {
		t.Fatalf("%s is %s, want 1.1.1", app, v)
	}
	if msg := apply(true); msg != "" {
		t.Fatalf("apply --locked after apply updated the lock: %s", msg)
	}

	// Signed with a key the source does not trust: refused, nothing applied
	// (apply(false) updates).
	publish("1.2.0", "stranger")
	msg := apply(false)
	t.Logf("refused: %s", msg)
	if msg == "" || !strings.Contains(msg, app) || !strings.Contains(msg, "1.2.0") || !strings.Contains(msg, "key") {
		t.Fatalf("a package signed with an untrusted key: %q", msg)
	}
	if v := version(app); v != "1.1.1" {
		t.Fatalf("a refused package changed %s to %s", app, v)
	}
}
