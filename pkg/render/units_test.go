package render_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// TestMaskedUnits: a unit a plugin masks (one the machine's OS has, such as
// update-engine.service) is stopped and masked by both formats — cloud-init's
// runcmd before any unit is started, Ignition's mask: true — and written
// nowhere; kubeplug's own units cannot be masked.
func TestMaskedUnits(t *testing.T) {
	in := fullInput(t)
	if d := in.Model.Add("os-tuning", &model.Contribution{Pools: map[string]*model.Pool{"workers": {Units: map[string]*model.Unit{
		"update-engine.service": {Mask: true},
		"locksmithd.service":    {Mask: true},
	}}}}); len(d) > 0 {
		t.Fatal(d)
	}
	files := mustRender(t, in)

	var cc struct {
		WriteFiles []struct{ Path string } `yaml:"write_files"`
		Runcmd     [][]string              `yaml:"runcmd"`
	}
	if err := yaml.Unmarshal(files["nodes/workers/cloud-init.yaml"], &cc); err != nil {
		t.Fatal(err)
	}
	for _, f := range cc.WriteFiles {
		if strings.Contains(f.Path, "update-engine") || strings.Contains(f.Path, "locksmithd") {
			t.Errorf("cloud-init writes %s for a masked unit", f.Path)
		}
	}
	want := "systemctl mask --now locksmithd.service update-engine.service"
	var lines []string
	for _, c := range cc.Runcmd {
		lines = append(lines, strings.Join(c, " "))
	}
	if len(lines) < 2 || lines[1] != want {
		t.Errorf("runcmd = %q, want %q right after daemon-reload, before any unit starts", lines, want)
	}
	if strings.Contains(string(files["nodes/gpu-nodes/cloud-init.yaml"]), "mask") {
		t.Error("another pool's cloud-init masks the units too")
	}

	var ign struct {
		Systemd struct {
			Units []map[string]any
		}
	}
	if err := json.Unmarshal(files["nodes/workers/ignition.json"], &ign); err != nil {
		t.Fatal(err)
	}
	masked := 0
	for _, u := range ign.Systemd.Units {
		if n := u["name"]; n == "update-engine.service" || n == "locksmithd.service" {
			masked++
			if u["mask"] != true || u["contents"] != nil || u["enabled"] != nil {
				t.Errorf("ignition unit %v: want mask: true and nothing else", u)
			}
		}
	}
	if masked != 2 {
		t.Errorf("ignition has %d of the 2 masked units", masked)
	}

	for _, unit := range []string{"kubelet.service", "kubeplug-boot.service"} {
		in := fullInput(t)
		if d := in.Model.Add("os-tuning", &model.Contribution{Pools: map[string]*model.Pool{"workers": {Units: map[string]*model.Unit{unit: {Mask: true}}}}}); len(d) > 0 {
			t.Fatal(d)
		}
		_, diags := render.Files(context.Background(), in)
		if got := diags.Fatal().String(); !strings.Contains(got, "unit "+unit+" is kubeplug's own; it cannot be masked") || !strings.Contains(got, "os-tuning") {
			t.Errorf("masking %s: diagnostics %q", unit, got)
		}
	}
}

// TestMaskedUnitConflicts: one plugin masking a unit another writes or
// enables is a conflict naming both, whichever comes first.
func TestMaskedUnitConflicts(t *testing.T) {
	for _, order := range [][2]string{{"mask", "write"}, {"write", "mask"}} {
		m := model.New(model.PoolSpec{Name: "workers", Role: model.RoleWorker, Count: 1})
		var d []string
		for _, who := range order {
			u := &model.Unit{Mask: true}
			if who == "write" {
				u = &model.Unit{Content: "[Service]\nExecStart=/bin/true\n", Enable: true}
			}
			for _, x := range m.Add(who, &model.Contribution{Pools: map[string]*model.Pool{"workers": {Units: map[string]*model.Unit{"agent.service": u}}}}) {
				d = append(d, x.String())
			}
		}
		got := strings.Join(d, "\n")
		if !strings.Contains(got, "agent.service") || !strings.Contains(got, order[0]) || !strings.Contains(got, order[1]) {
			t.Errorf("%v: diagnostics %q, want a conflict on agent.service naming both", order, got)
		}
	}
}
