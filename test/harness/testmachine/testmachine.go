// Package testmachine lays a pool's rendered machine files down under a
// directory, for tests that run the node agent on them without a provider.
package testmachine

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"sigs.k8s.io/yaml"
)

// FromCloudInit writes the write_files of the pool's rendered cloud-init
// (files["nodes/POOL/cloud-init.yaml"], as action.Render.Files returns them) under
// root with their modes, the way a machine booting from it would get them, and
// returns root.
func FromCloudInit(t testing.TB, files map[string][]byte, pool, root string) string {
	t.Helper()
	var ci struct {
		WriteFiles []struct {
			Path        string `json:"path"`
			Permissions string `json:"permissions"`
			Encoding    string `json:"encoding"`
			Content     string `json:"content"`
		} `json:"write_files"`
	}
	name := "nodes/" + pool + "/cloud-init.yaml"
	if err := yaml.Unmarshal(files[name], &ci); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, f := range ci.WriteFiles {
		b := []byte(f.Content)
		if f.Encoding == "b64" {
			var err error
			if b, err = base64.StdEncoding.DecodeString(f.Content); err != nil {
				t.Fatalf("%s: %v", f.Path, err)
			}
		}
		mode, err := strconv.ParseUint(f.Permissions, 8, 32)
		if err != nil {
			t.Fatalf("%s: permissions %q: %v", f.Path, f.Permissions, err)
		}
		p := filepath.Join(root, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, os.FileMode(mode)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
