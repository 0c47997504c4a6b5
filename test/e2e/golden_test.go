package e2e

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
)

var update = flag.Bool("update", false, "rewrite the golden renders under testdata/golden")

// fixedEnv resolves only the variables in vars (none for nil), so renders do not
// depend on the host.
func fixedEnv(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// goldenExamples are the cluster files under golden review: name is the directory
// of their goldens, file the cluster file (default examples/<name>/cluster.yaml),
// env the only environment their valuesFrom sees.
var goldenExamples = []struct {
	name, file string
	env        map[string]string
}{
	{name: "quickstart"},
	{name: "platform"},
	// Where `make node-exporter` puts node_exporter in a checkout at /src/kubeplug.
	{name: "baseline", env: map[string]string{"NODE_EXPORTER_SOURCE": "/src/kubeplug/_output/tools/node_exporter"}},
	{name: "failing"},
	{name: "failing-hook", file: "failing/cluster-hook.yaml"},
	{name: "machines"},
}

// TestRenderGolden keeps every file the examples render under review: a change to a
// renderer or a built-in plugin shows up as a diff of these files.
// Regenerate with: go test ./test/e2e -run TestRenderGolden -update
func TestRenderGolden(t *testing.T) {
	for _, ex := range goldenExamples {
		example := ex.name
		t.Run(example, func(t *testing.T) {
			cfg := &action.Config{ContribDir: "../../contrib/plugins", Env: fixedEnv(ex.env)}
			file := filepath.Join(example, "cluster.yaml")
			if ex.file != "" {
				file = filepath.FromSlash(ex.file)
			}
			cl, l := config.Load(filepath.Join("../../examples", file))
			if cl == nil {
				t.Fatal(l)
			}
			files, fl := action.NewRender(cfg).Files(context.Background(), cl)
			l = append(l, fl...)
			if l.HasFatal() {
				t.Fatal(l)
			}
			dir := filepath.Join("testdata", "golden", example)
			if *update {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				for name, b := range files {
					p := filepath.Join(dir, filepath.FromSlash(name))
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			var onDisk []string
			err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, err := filepath.Rel(dir, p)
				onDisk = append(onDisk, filepath.ToSlash(rel))
				return err
			})
			if err != nil {
				t.Fatalf("read goldens (run with -update to create them): %v", err)
			}
			var rendered []string
			for name := range files {
				rendered = append(rendered, name)
			}
			slices.Sort(rendered)
			slices.Sort(onDisk)
			if !slices.Equal(rendered, onDisk) {
				t.Fatalf("rendered files %v, golden files %v", rendered, onDisk)
			}
			for _, name := range rendered {
				want, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(files[name], want) {
					t.Errorf("%s differs from its golden file; run with -update and review the diff", name)
				}
			}
		})
	}
}
