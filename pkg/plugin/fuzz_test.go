package plugin_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// addSeeds adds every file matching the globs as a seed.
func addSeeds(f *testing.F, globs ...string) {
	f.Helper()
	n := 0
	for _, g := range globs {
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
		f.Fatalf("no seeds in %v", globs)
	}
}

// FuzzDecodeManifest checks that DecodeManifest never panics, and that a manifest
// it accepts survives a round trip through YAML unchanged.
func FuzzDecodeManifest(f *testing.F) {
	addSeeds(f,
		"../../plugins/*/plugin.yaml",
		"../../examples/*/plugins/*/plugin.yaml",
		"../../testdata/bad/*/plugin.yaml",
		"../../testdata/bad/*/plugins/*/plugin.yaml",
		"../../testdata/bad/_shared/plugins/*/plugin.yaml",
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, _, l := plugin.DecodeManifest("plugin.yaml", data)
		if m == nil || l.HasFatal() {
			return
		}
		out, err := yaml.Marshal(m)
		if err != nil {
			t.Fatalf("encode an accepted manifest: %v", err)
		}
		m2, _, l2 := plugin.DecodeManifest("plugin.yaml", out)
		if m2 == nil || l2.HasFatal() {
			t.Fatalf("an accepted manifest, encoded again, is refused:\n%s\n%s", l2, out)
		}
		// Compare as JSON: an empty list or mapping and an absent one mean the same,
		// and so do 1.0 and 1.
		j1, err1 := json.Marshal(m)
		j2, err2 := json.Marshal(m2)
		if err1 != nil || err2 != nil {
			t.Fatalf("encode as JSON: %v, %v", err1, err2)
		}
		if !bytes.Equal(j1, j2) {
			t.Fatalf("the manifest changed in a round trip through YAML:\nfirst  %s\nsecond %s\nYAML:\n%s", j1, j2, out)
		}
	})
}
