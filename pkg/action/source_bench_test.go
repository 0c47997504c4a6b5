package action_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
)

// writeLargeSource writes a plugin directory of plugins × versions packages (each
// with a values schema and a manifest, plugin i requiring plugin i/2) and a cluster
// file enabling the first enabled plugins. It returns the cluster file's path.
func writeLargeSource(tb testing.TB, plugins, versions, enabled int) string {
	tb.Helper()
	dir := tb.TempDir()
	write := func(p, content string) {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range plugins {
		name := fmt.Sprintf("p%04d", i)
		req := ""
		if i > 0 {
			req = fmt.Sprintf("  requires: [{name: p%04d, version: \">=1.0\"}]\n", i/2)
		}
		for v := range versions {
			pkg := fmt.Sprintf("plugins/%s/1.%d.0/", name, v)
			write(pkg+"plugin.yaml", fmt.Sprintf(`apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: %[1]s, version: 1.%[2]d.0}
spec:
%[3]s  values:
    schema: values.schema.json
    defaults: {replicas: 2}
  contributes:
    kubernetes:
      manifests: [manifests/]
`, name, v, req))
			write(pkg+"values.schema.json", `{"type":"object","properties":{"replicas":{"type":"integer","minimum":1}}}`)
			write(pkg+"manifests/cm.yaml", fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: default}\ndata: {replicas: \"{{ .Values.replicas }}\"}\n", name))
		}
	}
	var b strings.Builder
	for i := range enabled {
		fmt.Fprintf(&b, "      - {name: p%04d}\n", i)
	}
	write("cluster.yaml", `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: bench}
spec:
  kubernetesVersion: 1.36.3
  plugins:
    sources: [{dir: ./plugins}]
    enabled:
`+b.String())
	return filepath.Join(dir, "cluster.yaml")
}

// BenchmarkPlanLargeSource plans 200 plugins from one directory of 500 plugins × 10
// versions: listing reads every plugin.yaml, but only the 200 packages picked are
// loaded whole.
func BenchmarkPlanLargeSource(b *testing.B) {
	path := writeLargeSource(b, 500, 10, 200)
	a := action.NewPlan(&action.Config{NoBuiltin: true})
	b.ReportAllocs()
	for b.Loop() {
		doc, l := a.Run(context.Background(), load(b, path))
		if l.HasFatal() {
			b.Fatal(l)
		}
		if len(doc.Plugins) != 200 {
			b.Fatalf("planned %d plugins", len(doc.Plugins))
		}
	}
}
