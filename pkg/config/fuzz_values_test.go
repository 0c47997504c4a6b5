package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/test/harness/fuzzseed"
)

// FuzzValuesFile checks that a valuesFrom file, whatever its bytes, never
// panics the values computation, that the values are always returned, and that
// when no diagnostic is fatal they are plain data (they encode as JSON, as every
// plugin request does).
func FuzzValuesFile(f *testing.F) {
	fuzzseed.Add(f, fuzzseed.YAML())
	files, err := filepath.Glob("../../testdata/bad/*/*values*.yaml")
	if err != nil || len(files) == 0 {
		f.Fatalf("no values files to seed from (%v)", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("replicas: 3\nlogLevel: debug\npassword: s3cret\n"))

	// The demo plugin has a schema, defaults and a sensitive value: every layer
	// of the computation runs.
	pkg, l := plugin.Load(os.DirFS("../../testdata/bad/_shared/plugins/demo"), plugin.OriginUser, "demo")
	if l.HasFatal() {
		f.Fatal(l)
	}
	dir := f.TempDir()
	clusterFile := filepath.Join(dir, "cluster.yaml")
	cl, l := config.Parse(clusterFile, []byte(`apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: demo}
spec:
  kubernetesVersion: 1.36.3
  nodePools: [{name: workers, role: worker, count: 1}]
  plugins:
    enabled:
      - name: demo
        valuesFrom: [{file: values.yaml}]
        nodePools: [{name: workers, values: {replicas: 2}}]
`))
	if cl == nil {
		f.Fatal(l)
	}
	valuesFile := filepath.Join(dir, "values.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(valuesFile, data, 0o600); err != nil {
			t.Fatal(err)
		}
		v, l := cl.ValuesWith(0, pkg, config.ValuesOptions{Env: func(string) (string, bool) { return "", false }})
		if v == nil {
			t.Fatalf("no values, with diagnostics:\n%s", l)
		}
		for _, d := range l {
			if d.File == "" {
				t.Errorf("unlocated diagnostic: %s", d)
			}
		}
		if l.HasFatal() {
			return
		}
		if _, err := json.Marshal(v.Cluster); err != nil {
			t.Errorf("values without a fatal diagnostic do not encode: %v", err)
		}
		_ = v.Redacted()
	})
}
