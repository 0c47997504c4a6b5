package source_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/source"
)

// TestKKPDefinitions: a file of KKP ApplicationDefinitions is a source whose
// every Helm version is a plugin version installing the chart by reference;
// broken versions are reported naming file, definition and field, and left out.
func TestKKPDefinitions(t *testing.T) {
	file := filepath.Join(t.TempDir(), "apps.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: apps.kubermatic.k8c.io/v1
kind: ApplicationDefinition
metadata: {name: podinfo}
spec:
  description: |
    Podinfo, a tiny web application.
    More words.
  method: helm
  defaultNamespace: {name: web}
  defaultValues:
    replicaCount: 2
    ui: {message: "hello {{ .Cluster.Name }}"}
    ns: "{{ `+"`{{ .Release.Namespace }}`"+` }}"
  versions:
    - version: v6.1.0
      template: {source: {helm: {url: "https://charts.example.com", chartName: podinfo, chartVersion: 6.1.0}}}
    - version: 6.0.0
      template: {source: {helm: {url: "oci://registry.example/charts", chartName: podinfo, chartVersion: 6.0.0}}}
    - version: 5.0.0
      template: {source: {git: {remote: "https://github.com/x/y"}}}
    - version: latest
      template: {source: {helm: {url: "https://charts.example.com", chartName: podinfo, chartVersion: 1.0.0}}}
---
# a comment
apiVersion: v1
kind: ConfigMap
metadata: {name: nope}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	src := source.Path(source.OriginCatalog, file)
	vs, l := src.List(t.Context())
	var ids []string
	for _, v := range vs {
		ids = append(ids, v.ID())
	}
	if got := strings.Join(ids, " "); got != "podinfo@6.1.0 podinfo@6.0.0" {
		t.Fatalf("listed %q", got)
	}
	msgs := l.String()
	for _, want := range []string{
		`ApplicationDefinition podinfo (document 1) 5.0.0: a git source (https://github.com/x/y), which kubeplug does not install; left out`,
		`ApplicationDefinition podinfo (document 1): version "latest" is not a semantic version`,
		`"hello {{ .Cluster.Name }}" is a KKP template, rendered with data kubeplug does not have; left out`,
		`expected a KKP ApplicationDefinition (apiVersion apps.kubermatic.k8c.io/v1, kind ApplicationDefinition), found apiVersion "v1" and kind "ConfigMap"`,
	} {
		if !strings.Contains(msgs, want) {
			t.Errorf("diagnostics %q lack %q", msgs, want)
		}
	}
	for i, want := range []struct{ repo, chart string }{{"https://charts.example.com", "podinfo"}, {"", "oci://registry.example/charts/podinfo"}} {
		pkg, fl := src.Fetch(t.Context(), vs[i])
		if pkg == nil || fl.HasFatal() {
			t.Fatalf("fetch %s: %v", vs[i].ID(), fl)
		}
		m := pkg.Manifest
		h := m.Spec.Contributes.Kubernetes.HelmReleases
		if len(h) != 1 || h[0].Name != "podinfo" || h[0].Namespace != "web" || h[0].Repo != want.repo || h[0].Chart != want.chart || h[0].Version != vs[i].Version.String() {
			t.Errorf("%s: release %+v", vs[i].ID(), h)
		}
		if m.Metadata.Description != "Podinfo, a tiny web application." {
			t.Errorf("description %q", m.Metadata.Description)
		}
		if d := m.Spec.Values.Defaults; fmt.Sprint(d) != "map[ns:{{ .Release.Namespace }} replicaCount:2 ui:map[]]" {
			t.Errorf("defaults %v", d)
		}
	}
}
