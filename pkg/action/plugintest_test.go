package action_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/action"
)

// widgetPlugin writes version v of a plugin whose ConfigMap carries v and whose
// validate check waits for it.
func widgetPlugin(t *testing.T, dir, v, extra string) string {
	t.Helper()
	p := filepath.Join(dir, "widget-"+v)
	files := map[string]string{
		"plugin.yaml": "apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: widget, version: " + v + "}\n" +
			"spec:\n  contributes: {kubernetes: {manifests: [manifests/]}}\n" +
			"  validate:\n    - {name: configmap, expression: {apiVersion: v1, kind: ConfigMap, namespace: widget, name: widget, expression: 'object.data.version == \"" + v + "\"', timeout: 30s}}\n",
		"manifests/objects.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: widget}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: widget, namespace: widget}\ndata: {version: \"" + v + "\"}\n" + extra,
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(p, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestPluginTestCluster: --cluster installs a plugin (upgrading it from its
// previous version) in a throwaway local cluster, runs its checks, uninstalls
// it and deletes the cluster; a plugin that does not become ready fails naming
// why, and its cluster is deleted too. Neither leaves a process behind.
func TestPluginTestCluster(t *testing.T) {
	dir := t.TempDir()
	// The throwaway clusters' directories under dir, so that the check for
	// leftovers sees this test's clusters only, not those of another run on
	// this machine.
	t.Setenv("TMPDIR", dir)
	prev := widgetPlugin(t, dir, "0.1.0", "")
	next := widgetPlugin(t, dir, "0.2.0", "---\napiVersion: v1\nkind: Secret\nmetadata: {name: widget, namespace: widget}\nstringData: {a: b}\n")
	a := action.NewPluginTest(&action.Config{})
	a.Cluster, a.UpgradeFrom, a.Timeout = true, prev, time.Minute
	res, l := a.Run(t.Context(), next)
	if l.HasFatal() || res == nil || res.Cluster == nil {
		t.Fatalf("plugin test --cluster: %v", l)
	}
	c := res.Cluster
	if c.UpgradedFrom != "0.1.0" || c.Objects != 3 || len(c.Checks) != 1 || !c.Checks[0].OK {
		t.Errorf("result = %+v", c)
	}
	noClusterLeft(t, dir)

	broken := widgetPlugin(t, filepath.Join(dir, "broken"), "0.3.0",
		"---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: stuck, namespace: widget}\nspec:\n  replicas: 1\n  progressDeadlineSeconds: 2\n  selector: {matchLabels: {app: stuck}}\n  template:\n    metadata: {labels: {app: stuck}}\n    spec:\n      nodeSelector: {no-such-node: \"true\"}\n      containers: [{name: c, image: registry.example/c:1}]\n")
	a = action.NewPluginTest(&action.Config{})
	a.Cluster, a.Timeout = true, 5*time.Second
	if _, l := a.Run(t.Context(), broken); !l.HasFatal() || !strings.Contains(l.Err().Error(), "Deployment") {
		t.Fatalf("a plugin that never becomes ready: %v", l)
	}
	noClusterLeft(t, dir)
}

// noClusterLeft checks that no component of a throwaway cluster made in dir
// (TMPDIR) still runs.
func noClusterLeft(t *testing.T, dir string) {
	t.Helper()
	out, _ := exec.Command("pgrep", "-af", filepath.Join(dir, "kubeplug-plugin-test-")).CombinedOutput()
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Fatalf("processes of a throwaway cluster are left:\n%s", s)
	}
}
