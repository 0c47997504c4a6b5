package action_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
)

// writeCluster writes n plugins, each depending on an earlier one, contributing
// flags, node files, a systemd unit, kubelet labels and five Kubernetes objects, and
// a cluster file enabling all of them. It returns the cluster file's path.
func writeCluster(tb testing.TB, n int) string {
	tb.Helper()
	dir := tb.TempDir()
	var enabled strings.Builder
	for i := range n {
		name := fmt.Sprintf("p%03d", i)
		req := ""
		if i > 0 {
			req = fmt.Sprintf("  requires: [{name: p%03d}]\n", i/2)
		}
		manifest := fmt.Sprintf(`apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: %[1]s, version: 1.%[2]d.0}
spec:
%[3]s  values:
    schema: values.schema.json
    defaults: {replicas: 2, image: "registry.example/%[1]s:v1", token: "t"}
    sensitive: [/token]
  contributes:
    controlPlane:
      apiServer: {flags: {%[1]s-flag: "{{ .Values.replicas }}"}}
    nodes:
      - files: [{path: /etc/%[1]s/config, content: "image={{ .Values.image }}\n"}]
        systemdUnits: [{name: %[1]s.service, enable: true, content: "[Service]\nExecStart=/bin/true\n"}]
        kubelet: {labels: {%[1]s.example/enabled: "true"}}
    kubernetes:
      manifests: [manifests/]
`, name, i, req)
		var objs strings.Builder
		for j := range 5 {
			fmt.Fprintf(&objs, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s-%d, namespace: default}\ndata: {image: {{ .Values.image | quote }}, replicas: \"{{ .Values.replicas }}\", token: {{ .Values.token | quote }}}\n", name, j)
		}
		files := map[string]string{
			"plugin.yaml":        manifest,
			"values.schema.json": `{"type":"object","properties":{"replicas":{"type":"integer","minimum":1},"image":{"type":"string"},"token":{"type":"string"}}}`,
			"manifests/cm.yaml":  objs.String(),
		}
		for f, content := range files {
			p := filepath.Join(dir, "plugins", name, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
		fmt.Fprintf(&enabled, "      - {name: %s, values: {replicas: %d}}\n", name, i%5+1)
	}
	cluster := `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: bench}
spec:
  kubernetesVersion: 1.36.3
  nodePools: [{name: workers, count: 3}, {name: infra, count: 2}]
  plugins:
    sources: [{dir: ./plugins}]
    enabled:
` + enabled.String()
	path := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(path, []byte(cluster), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// BenchmarkRender200 loads, resolves, initialises and renders 200 plugins into
// memory (every file kubeplug render writes). Target: < 1 s and < 200 MB per render.
func BenchmarkRender200(b *testing.B) {
	path := writeCluster(b, 200)
	a := action.NewRender(&action.Config{NoBuiltin: true})
	var peak uint64
	b.ReportAllocs()
	for b.Loop() {
		files, l := a.Files(context.Background(), load(b, path))
		if l.HasFatal() {
			b.Fatal(l)
		}
		if len(files) < 200 {
			b.Fatalf("rendered %d files", len(files))
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
}

func TestRender200IsDeterministic(t *testing.T) {
	path := writeCluster(t, 200)
	a := action.NewRender(&action.Config{NoBuiltin: true})
	first, l := a.Files(context.Background(), load(t, path))
	if l.HasFatal() {
		t.Fatal(l)
	}
	second, _ := a.Files(context.Background(), load(t, path))
	if len(first) != len(second) {
		t.Fatalf("%d files, then %d", len(first), len(second))
	}
	for name, b := range first {
		if string(second[name]) != string(b) {
			t.Errorf("%s differs between two renders", name)
		}
		if strings.Contains(string(b), `token: "t"`) {
			t.Errorf("%s holds a sensitive value in clear", name)
		}
	}
}
