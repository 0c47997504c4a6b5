package action_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// dependentsCluster writes a cluster enabling "base" (with values level) and
// "app", which requires base and renders base's level into its own ConfigMap.
func dependentsCluster(t *testing.T, dir, ns, level string) string {
	t.Helper()
	files := map[string]string{
		"cluster.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: dependents}
spec:
  kubernetesVersion: 1.37.1
  plugins:
    sources: [{dir: ./plugins}]
    enabled:
      - name: base
        values: {level: ` + level + `}
      - name: app
`,
		"plugins/base/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: base, version: 1.0.0}
spec:
  values: {defaults: {level: info}}
  contributes: {kubernetes: {manifests: [manifests/]}}
`,
		"plugins/base/manifests/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: base, namespace: ` + ns + `}
data: {level: {{ .Values.level | quote }}}
`,
		"plugins/app/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: app, version: 1.0.0}
spec:
  requires: [{name: base}]
  contributes: {kubernetes: {manifests: [manifests/]}}
`,
		"plugins/app/manifests/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: ` + ns + `}
data: {baseLevel: {{ .Plugins.base.Values.level | quote }}}
`,
	}
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "cluster.yaml")
}

// TestValuesChangeUpgradesDependents: changing a plugin's values in cluster.yaml
// upgrades it and re-renders the plugins that read them, each into a new revision,
// while a plugin whose content did not change keeps its revision.
func TestValuesChangeUpgradesDependents(t *testing.T) {
	ns := testcluster.Namespace(t)
	dir := t.TempDir()
	cfg := &action.Config{NoBuiltin: true, Env: func(string) (string, bool) { return "", false }}
	apply := action.NewApply(cfg)
	apply.Target.RESTConfig = testcluster.RESTConfig(t)
	apply.Timeout = time.Minute
	for _, level := range []string{"info", "info", "debug"} {
		if _, l := apply.Run(t.Context(), load(t, dependentsCluster(t, dir, ns, level))); l.HasFatal() {
			t.Fatalf("apply with level %s: %v", level, l)
		}
	}
	cs := kubernetes.NewForConfigOrDie(testcluster.RESTConfig(t))
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["baseLevel"]; got != "debug" {
		t.Errorf("app's ConfigMap says base's level is %q, want debug (app was not re-rendered)", got)
	}
	hist := action.NewHistory(cfg)
	hist.Target.RESTConfig = testcluster.RESTConfig(t)
	for _, plugin := range []string{"base", "app"} {
		revs, l := hist.Run(t.Context(), plugin)
		if l.HasFatal() {
			t.Fatal(l)
		}
		// Install, then the values change; the identical second apply recorded nothing.
		if len(revs) != 2 {
			t.Errorf("%s has %d revisions, want 2: %+v", plugin, len(revs), revs)
		}
	}
}
