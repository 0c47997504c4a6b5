package action_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestHelmIndex10000 resolves a chart against a loopback Helm repository whose
// index.yaml lists 10,000 versions of it, and installs the picked version into
// the test control plane — as a plugin of a type: helm source, and as a chart
// by reference of a plugin's release — logging the time each took and the
// requests the repository served: the index once per run and the one archive
// picked, nothing else. Run with -v to see the numbers:
//
//	go test ./pkg/action -run TestHelmIndex10000 -v
func TestHelmIndex10000(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx := context.Background()
	name := fmt.Sprintf("big-%d", time.Now().UnixNano()%1_000_000)
	const versions = 10000
	picked := fmt.Sprintf("1.%d.0", versions-1)
	tgz, err := os.ReadFile(packChart(t, t.TempDir(), name, picked, chartTemplate))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(tgz)
	var index strings.Builder
	fmt.Fprintf(&index, "apiVersion: v1\nentries:\n  %s:\n", name)
	for i := range versions {
		v := fmt.Sprintf("1.%d.0", i)
		d := sha256.Sum256([]byte(v)) // never fetched
		if v == picked {
			d = sum
		}
		fmt.Fprintf(&index, "    - name: %s\n      version: %s\n      apiVersion: v2\n      digest: %s\n      urls: [%s-%s.tgz]\n      created: \"2026-01-01T00:00:00Z\"\n",
			name, v, hex.EncodeToString(d[:]), name, v)
	}
	var mu sync.Mutex
	requests := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/index.yaml":
			_, _ = w.Write([]byte(index.String()))
		case "/" + name + "-" + picked + ".tgz":
			_, _ = w.Write(tgz)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Logf("index.yaml: %d versions, %d bytes", versions, index.Len())
	counts := func() string {
		mu.Lock()
		defer mu.Unlock()
		s := fmt.Sprintf("%d requests (index.yaml %d, archive %d)", requests["/index.yaml"]+requests["/"+name+"-"+picked+".tgz"], requests["/index.yaml"], requests["/"+name+"-"+picked+".tgz"])
		clear(requests)
		return s
	}

	work := t.TempDir()
	writePlugin(t, filepath.Join(work, "plugins"), "byref", "1.0.0", fmt.Sprintf(`
  contributes:
    kubernetes:
      helmReleases:
        - {name: byref, namespace: %s, repo: %s, chart: %s, version: 1.x}`, name, srv.URL, name))
	sourceFile, refFile := filepath.Join(work, "source.yaml"), filepath.Join(work, "ref.yaml")
	for file, plugins := range map[string]string{
		sourceFile: fmt.Sprintf("sources: [{catalog: %s, type: helm}]\n    enabled: [{name: %s, version: 1.x, values: {args: [--a], replicas: 1}}]", srv.URL, name),
		refFile:    "sources: [{dir: ./plugins}]\n    enabled: [{name: byref}]",
	} {
		if err := os.WriteFile(file, fmt.Appendf(nil, "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: big}\nspec:\n  kubernetesVersion: 1.37.1\n  plugins:\n    %s\n", plugins), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &action.Config{NoBuiltin: true}
	t.Cleanup(func() {
		for _, p := range []string{name, "byref"} {
			u := action.NewUninstall(cfg)
			u.Target.RESTConfig = testcluster.RESTConfig(t)
			_, _ = u.Run(context.WithoutCancel(ctx), p)
		}
		_ = testcluster.Client(t).CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	})
	for _, tc := range []struct{ name, file, cm string }{
		{"type: helm source", sourceFile, name},
		{"chart by reference", refFile, "byref"},
	} {
		start := time.Now()
		doc, l := action.NewPlan(cfg).Run(ctx, load(t, tc.file))
		if l.HasFatal() {
			t.Fatalf("%s: plan: %v", tc.name, l)
		}
		t.Logf("%s: plan (list 10,000 versions, resolve %s, fetch its archive) took %v, %s", tc.name, picked, time.Since(start).Round(time.Millisecond), counts())
		_ = doc
		start = time.Now()
		a := action.NewApply(cfg)
		a.Target.RESTConfig = testcluster.RESTConfig(t)
		a.Timeout = time.Minute
		if _, l := a.Run(ctx, load(t, tc.file)); l.HasFatal() {
			t.Fatalf("%s: apply: %v", tc.name, l)
		}
		t.Logf("%s: apply (resolve again, archive from the cache, install) took %v, %s", tc.name, time.Since(start).Round(time.Millisecond), counts())
		cm, err := testcluster.Client(t).CoreV1().ConfigMaps(name).Get(ctx, tc.cm, metav1.GetOptions{})
		if err != nil || cm.Data["version"] != picked {
			t.Fatalf("%s: the installed chart's ConfigMap: %v %v, want version %s", tc.name, cm.Data, err, picked)
		}
	}
}
