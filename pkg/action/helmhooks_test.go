package action_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// hooksChart is a chart with Helm hooks of every kind the test observes: a
// pre-install hook kept, a post-install hook deleted once it succeeded
// (hook-succeeded), a pre-delete hook, and a test hook — which fails when
// .Values.failTest puts it in a namespace that does not exist.
var hooksChart = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: hooks\nversion: 0.1.0\n",
	"values.yaml": "failTest: false\n",
	"templates/main.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-main}
`,
	"templates/hooks.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-pre-install
  annotations: {helm.sh/hook: pre-install, helm.sh/hook-weight: "-5"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-post-install
  annotations: {helm.sh/hook: post-install, helm.sh/hook-delete-policy: hook-succeeded}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-pre-upgrade
  annotations: {helm.sh/hook: pre-upgrade, helm.sh/hook-weight: "3"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-pre-delete
  annotations: {helm.sh/hook: pre-delete}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-test
  {{- if .Values.failTest }}
  namespace: no-such-namespace-for-helm-test
  {{- end }}
  annotations: {helm.sh/hook: test}
`,
}

// TestHelmHooksAndTests applies, to the test control plane, a plugin whose chart
// has hooks: they run as Helm runs them (a pre-install hook created, a
// hook-succeeded one deleted, a pre-upgrade one created on upgrade only, a
// pre-delete one created on uninstall), and with
// test: true the chart's test hook runs in validate as `helm test` runs it — a
// validate result when it passes, a failed validation naming the release and
// the hook when it fails.
func TestHelmHooksAndTests(t *testing.T) {
	ctx := context.Background()
	name := fmt.Sprintf("hooks-%d", time.Now().UnixNano()%1_000_000)
	work := t.TempDir()
	dir := writePlugin(t, filepath.Join(work, "plugins"), name, "1.0.0", `
  contributes:
    kubernetes:
      helmReleases:
        - {chart: chart, namespace: `+name+`, test: true, values: {failTest: {fromValue: /failTest}}}`)
	for f, data := range hooksChart {
		p := filepath.Join(dir, "chart", f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cluster := func(failTest bool) string {
		file := filepath.Join(work, "cluster.yaml")
		if err := os.WriteFile(file, fmt.Appendf(nil, `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: hooks}
spec:
  kubernetesVersion: 1.37.1
  plugins:
    sources: [{dir: ./plugins}]
    enabled: [{name: %s, values: {failTest: %v}}]
`, name, failTest), 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	cfg := &action.Config{NoBuiltin: true}
	kc := testcluster.Client(t)
	t.Cleanup(func() {
		u := action.NewUninstall(cfg)
		u.Target.RESTConfig = testcluster.RESTConfig(t)
		_, _ = u.Run(context.WithoutCancel(ctx), name)
		_ = kc.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	})
	exists := func(cm string) bool {
		_, err := kc.CoreV1().ConfigMaps(name).Get(ctx, cm, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	a := action.NewApply(cfg)
	a.Target.RESTConfig = testcluster.RESTConfig(t)
	a.Timeout = time.Minute
	res, l := a.Run(ctx, load(t, cluster(false)))
	if l.HasFatal() {
		t.Fatalf("apply: %v", l)
	}
	for cm, want := range map[string]bool{name + "-main": true, name + "-pre-install": true, name + "-post-install": false, name + "-test": true, name + "-pre-upgrade": false, name + "-pre-delete": false} {
		if got := exists(cm); got != want {
			t.Errorf("after install: ConfigMap %s exists %v, want %v", cm, got, want)
		}
	}
	var helmTest string
	for _, c := range res.Checks {
		if c.Name == "helm test "+name+"/"+name {
			helmTest = fmt.Sprintf("%v %s", c.OK, c.Message)
		}
	}
	if helmTest != "true ConfigMap "+name+"-test succeeded" {
		t.Errorf("the helm test validate result: %q", helmTest)
	}

	// New values upgrade the release, running its pre-upgrade hook; its
	// failing test hook then fails validation, naming the release and the hook.
	_, l = a.Run(ctx, load(t, cluster(true)))
	if !exists(name + "-pre-upgrade") {
		t.Error("the pre-upgrade hook did not run on upgrade")
	}
	if msg := l.String(); !l.HasFatal() || !strings.Contains(msg, `validate check "helm test `+name+"/"+name+`": helm test of release `+name+"/"+name) {
		t.Errorf("apply with a failing test hook: %s", msg)
	} else {
		t.Log(msg)
	}

	u := action.NewUninstall(cfg)
	u.Target.RESTConfig = testcluster.RESTConfig(t)
	if _, err := u.Run(ctx, name); err != nil {
		t.Fatal(err)
	}
	if !exists(name + "-pre-delete") {
		t.Error("the pre-delete hook did not run on uninstall")
	}
	if exists(name + "-main") {
		t.Error("the chart's ConfigMap is left after uninstall")
	}
}

// TestPluginTestClusterRunsHelmTests: kubeplug plugin test --cluster runs the
// test hooks of a release with test: true in its throwaway cluster's validate,
// and reports them among the plugin's checks.
func TestPluginTestClusterRunsHelmTests(t *testing.T) {
	base := t.TempDir()
	t.Setenv("TMPDIR", base) // the throwaway cluster's directory, for noClusterLeft
	dir := writePlugin(t, base, "hooked", "1.0.0", `
  contributes:
    kubernetes:
      helmReleases:
        - {chart: chart, namespace: hooked, test: true}`)
	for f, data := range hooksChart {
		p := filepath.Join(dir, "chart", f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := action.NewPluginTest(&action.Config{})
	a.Cluster, a.Timeout = true, time.Minute
	res, l := a.Run(t.Context(), dir)
	if l.HasFatal() || res == nil || res.Cluster == nil {
		t.Fatalf("plugin test --cluster: %v", l)
	}
	var got []string
	for _, c := range res.Cluster.Checks {
		got = append(got, fmt.Sprintf("%s: %v %s", c.Name, c.OK, c.Message))
	}
	if want := "helm test hooked/hooked: true ConfigMap hooked-test succeeded"; !slices.Contains(got, want) {
		t.Errorf("checks %q, want %q among them", got, want)
	}
	noClusterLeft(t, base)
}
