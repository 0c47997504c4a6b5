package render_test

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kubeplug/kubeplug/pkg/render"
)

// TestMachinesMatchCloudInit checks that the exported machines hold exactly the
// files, modes and contents cloud-init writes for each pool, units included, so
// a provider laying Machines down gets what a booted machine gets.
func TestMachinesMatchCloudInit(t *testing.T) {
	in := fullInput(t)
	files := mustRender(t, in)
	machines, diags := render.Machines(t.Context(), in)
	if diags.HasFatal() {
		t.Fatalf("machines: %s", diags)
	}
	if got, want := len(machines), len(in.Model.Pools); got != want {
		t.Fatalf("%d machines for %d pools", got, want)
	}
	for pool, m := range machines {
		t.Run(pool, func(t *testing.T) {
			if m.Pool != pool || m.Role != in.Model.Pools[pool].Role {
				t.Errorf("machine pool %q role %q", m.Pool, m.Role)
			}
			var cc struct {
				WriteFiles []struct{ Path, Permissions, Encoding, Content string } `yaml:"write_files"`
			}
			if err := yaml.Unmarshal(files["nodes/"+pool+"/cloud-init.yaml"], &cc); err != nil {
				t.Fatal(err)
			}
			var want, got []string
			for _, f := range cc.WriteFiles {
				content := f.Content
				if f.Encoding == "b64" {
					b, _ := base64.StdEncoding.DecodeString(f.Content)
					content = string(b)
				}
				want = append(want, f.Path+" "+f.Permissions+" "+content)
			}
			for _, f := range append(m.Files, m.UnitFiles()...) {
				got = append(got, fmt.Sprintf("%s %04o %s", f.Path, f.Mode.Perm(), f.Content))
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("machine files differ from cloud-init:\ngot  %s\nwant %s", strings.Join(got, "\n---\n"), strings.Join(want, "\n---\n"))
			}
		})
	}
}
