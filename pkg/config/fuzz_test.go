package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/config"
)

// FuzzParseCluster checks that Parse never panics and returns a cluster exactly
// when no diagnostic is fatal.
func FuzzParseCluster(f *testing.F) {
	n := 0
	for _, g := range []string{"../../examples/*/cluster.yaml", "../../testdata/bad/*/cluster.yaml"} {
		files, err := filepath.Glob(g)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
			n++
		}
	}
	if n == 0 {
		f.Fatal("no seeds")
	}
	// The file lives in a directory of its own, so relative source dirs resolve
	// to nothing that exists.
	file := filepath.Join(f.TempDir(), "cluster.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		c, l := config.Parse(file, data)
		if (c == nil) != l.HasFatal() {
			t.Fatalf("cluster %v returned with diagnostics:\n%s", c != nil, l)
		}
		if c != nil {
			_ = c.Sources()
			_ = c.Enabled()
		}
	})
}
