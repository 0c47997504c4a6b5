package action_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestApplyChartFromHelmRepository applies, to the test control plane, a cluster
// that enables a chart of a Helm repository (a type: helm source, served on
// loopback as helm package and helm repo index make it) by name and version
// constraint alone: the newest matching version is installed as a Helm release,
// the list and the number of its values reaching the chart typed; uninstall
// removes it.
func TestApplyChartFromHelmRepository(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx := context.Background()
	name := fmt.Sprintf("hchart-%d", time.Now().UnixNano()%1_000_000)
	dist, work := t.TempDir(), t.TempDir()
	for _, version := range []string{"1.0.0", "1.1.0", "2.0.0"} {
		c, err := loader.LoadFiles([]*archive.BufferedFile{
			{Name: "Chart.yaml", Data: fmt.Appendf(nil, "apiVersion: v2\nname: %s\nversion: %s\nkubeVersion: '>=1.23.0-0'\n", name, version)},
			{Name: "values.yaml", Data: []byte("args: []\nreplicas: 1\n")},
			{Name: "templates/cm.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}}
data:
  version: {{ .Chart.Version | quote }}
  args: {{ join "," .Values.args | quote }}
  replicasKind: {{ kindOf .Values.replicas | quote }}
`)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := chartutil.Save(c, dist); err != nil {
			t.Fatal(err)
		}
	}
	web := httptest.NewServer(http.FileServer(http.Dir(dist)))
	defer web.Close()
	idx, err := repo.IndexDirectory(dist, web.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(dist, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(work, "cluster.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: charts}
spec:
  kubernetesVersion: 1.37.1
  plugins:
    sources: [{catalog: %s, type: helm}]
    enabled:
      - name: %s
        version: 1.x
        values: {args: [--a, --b], replicas: 3}
`, web.URL, name), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &action.Config{NoBuiltin: true}
	t.Cleanup(func() {
		u := action.NewUninstall(cfg)
		u.Target.RESTConfig = testcluster.RESTConfig(t)
		_, _ = u.Run(context.WithoutCancel(ctx), name)
		_ = testcluster.Client(t).CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	})
	a := action.NewApply(cfg)
	a.Target.RESTConfig = testcluster.RESTConfig(t)
	a.Timeout = time.Minute
	if _, l := a.Run(ctx, load(t, file)); l.HasFatal() {
		t.Fatalf("apply: %v", l)
	}
	cm, err := testcluster.Client(t).CoreV1().ConfigMaps(name).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's ConfigMap: %v", err)
	}
	if got := fmt.Sprint(cm.Data); got != "map[args:--a,--b replicasKind:float64 version:1.1.0]" {
		t.Errorf("ConfigMap data = %s, want version 1.1.0, args --a,--b and a float64", got)
	}
	secrets, err := testcluster.Client(t).CoreV1().Secrets(name).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	if err != nil || len(secrets.Items) != 1 || secrets.Items[0].Labels["status"] != "deployed" {
		t.Fatalf("Helm release records: %v %v", secrets, err)
	}

	u := action.NewUninstall(cfg)
	u.Target.RESTConfig = testcluster.RESTConfig(t)
	if _, err := u.Run(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := testcluster.Client(t).CoreV1().ConfigMaps(name).Get(ctx, name, metav1.GetOptions{}); err == nil {
		t.Error("the chart's ConfigMap is left after uninstall")
	}
}
