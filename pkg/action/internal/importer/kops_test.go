package importer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestKopsMatchesNodeup imports the clusters of kops' own nodeup golden tests and
// checks that the plugin says what nodeup built from them (tasks-*.yaml, checked
// in beside them): the hook's systemd unit byte for byte, every API server flag
// on nodeup's kube-apiserver command line.
func TestKopsMatchesNodeup(t *testing.T) {
	t.Run("hooks", func(t *testing.T) {
		dir := filepath.Join(testdata, "kops", "hooks-containerd-exec")
		res, err := FromKops(filepath.Join(dir, "cluster.yaml"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "tasks-hooks.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var task struct {
			Name       string `json:"Name"`
			Definition string `json:"definition"`
			Enabled    bool   `json:"enabled"`
		}
		if err := yaml.Unmarshal(data, &task); err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, n := range res.Packages[0].Manifest.Spec.Contributes.Nodes {
			for _, u := range n.SystemdUnits {
				if u.Name != task.Name {
					continue
				}
				found = true
				if u.Content != task.Definition {
					t.Errorf("unit %s differs from nodeup's:\n--- import\n%s\n--- nodeup\n%s", u.Name, u.Content, task.Definition)
				}
				if u.Enable != task.Enabled {
					t.Errorf("unit %s: enable %v, nodeup %v", u.Name, u.Enable, task.Enabled)
				}
			}
		}
		if !found {
			t.Errorf("no unit %s in the import", task.Name)
		}
	})
	t.Run("apiserver-flags", func(t *testing.T) {
		dir := filepath.Join(testdata, "kops", "audit")
		res, err := FromKops(filepath.Join(dir, "cluster.yaml"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "tasks-kube-apiserver.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		args := map[string]bool{}
		for _, f := range strings.Fields(string(data)) {
			args[f] = true
		}
		flags := res.Packages[0].Manifest.Spec.Contributes.ControlPlane.APIServer.Flags
		if len(flags) == 0 {
			t.Fatal("no API server flags imported")
		}
		for name, v := range flags {
			if !args["--"+name+"="+v] {
				t.Errorf("--%s=%s is not on nodeup's kube-apiserver command line", name, v)
			}
		}
	})
}
