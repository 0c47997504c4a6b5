package controller_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestHelmCatalog: a PluginCatalog of type helm lists a Helm repository's
// chart versions as plugin versions, and an installation of a chart by its
// name and a version constraint alone installs it with typed values; a helm
// source with verifyKeys is refused naming the field.
func TestHelmCatalog(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt = "ctrl-helm"
	namespace(t, cs, mgmt)

	chart := fmt.Sprintf("hc%d", time.Now().UnixNano()%1_000_000)
	dist := t.TempDir()
	for _, version := range []string{"1.0.0", "1.2.0", "2.0.0"} {
		c, err := loader.LoadFiles([]*archive.BufferedFile{
			{Name: "Chart.yaml", Data: fmt.Appendf(nil, "apiVersion: v2\nname: %s\nversion: %s\n", chart, version)},
			{Name: "values.yaml", Data: []byte("replicas: 1\n")},
			{Name: "templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-settings}\ndata:\n  version: {{ .Chart.Version | quote }}\n  replicasKind: {{ kindOf .Values.replicas | quote }}\n")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := chartutil.Save(c, dist); err != nil {
			t.Fatal(err)
		}
	}
	web := httptest.NewServer(http.FileServer(http.Dir(dist)))
	t.Cleanup(web.Close)
	idx, err := repo.IndexDirectory(dist, web.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(dist, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}

	startController(t, rc, 2*time.Second)
	create(t, dc, catGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: charts}, spec: {sources: [{url: "`+web.URL+`", type: helm}]}}`)
	catalog := readyAt(t, dc, catGVR, mgmt, "charts", time.Minute)
	got, _, _ := unstructured.NestedStringSlice(catalog.Object, "status", "plugins")
	if want := chart + "@1.0.0 " + chart + "@1.2.0 " + chart + "@2.0.0"; strings.Join(got, " ") != want {
		t.Errorf("catalog status.plugins = %v, want %s", got, want)
	}
	create(t, dc, instGVR, mgmt, `apiVersion: kubeplug.dev/v1alpha1
kind: PluginInstallation
metadata: {name: chart}
spec:
  catalogs: [charts]
  plugins:
    - name: `+chart+`
      version: "1.x"
      values: {replicas: 3}
`)
	readyAt(t, dc, instGVR, mgmt, "chart", 2*time.Minute)
	cm, err := cs.CoreV1().ConfigMaps(chart).Get(t.Context(), chart+"-settings", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's ConfigMap: %v", err)
	}
	if cm.Data["version"] != "1.2.0" || cm.Data["replicasKind"] != "float64" {
		t.Errorf("the chart installed as %v, want version 1.2.0 with a number for replicas", cm.Data)
	}

	// verifyKeys are kubeplug keys; a Helm repository's charts are not signed
	// with them: the catalog is not Ready, naming the field.
	create(t, dc, catGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: signed}, spec: {sources: [{url: "`+web.URL+`", type: helm, verifyKeys: keys}]}}`)
	waitFor(t, time.Minute, "the signed helm catalog refused", func() (bool, string) {
		u, err := dc.Resource(catGVR).Namespace(mgmt).Get(t.Context(), "signed", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st, reason, msg := condition(u, "Ready")
		return st == "False" && strings.Contains(msg, "spec.sources[0].verifyKeys"), st + " " + reason + ": " + msg
	})
}
