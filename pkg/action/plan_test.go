package action_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/pkg/action"
)

// TestPlanKubernetesUpgrade resolves testdata/k8supgrade at the file's Kubernetes
// 1.37.1 and at a target: cni 1.0.0 supports only <1.38 (2.0.0, >=1.38, requires
// ipam), dns 1.1.0 needs >=1.38 while 1.0.0 supports any, metrics has one version
// for any, legacy has none for >=1.38.
func TestPlanKubernetesUpgrade(t *testing.T) {
	for _, tc := range []struct {
		name, file, target string
		want               []action.PluginMove
		// unsatisfiable is a part of the error, when the target does not resolve.
		unsatisfiable string
	}{
		{name: "same version: everything stays", file: "base.yaml", target: "1.37.1", want: []action.PluginMove{
			{Plugin: "cni", Current: "1.0.0", Target: "1.0.0", Move: action.MoveStays, Supports: ">=1.36 <1.38"},
			{Plugin: "dns", Current: "1.0.0", Target: "1.0.0", Move: action.MoveStays},
			{Plugin: "metrics", Current: "1.0.0", Target: "1.0.0", Move: action.MoveStays},
		}},
		{name: "1.38: cni must move and brings ipam, dns may move", file: "base.yaml", target: "1.38.0", want: []action.PluginMove{
			{Plugin: "cni", Current: "1.0.0", Target: "2.0.0", Move: action.MoveMust, Supports: ">=1.36 <1.38"},
			{Plugin: "dns", Current: "1.0.0", Target: "1.1.0", Move: action.MoveMay},
			{Plugin: "metrics", Current: "1.0.0", Target: "1.0.0", Move: action.MoveStays},
			{Plugin: "ipam", Target: "1.0.0", Move: action.MoveAdded},
		}},
		{name: "1.38 with legacy: unsatisfiable, legacy blocked with its versions", file: "legacy.yaml", target: "1.38.0", want: []action.PluginMove{
			{Plugin: "cni", Current: "1.0.0", Target: "2.0.0", Move: action.MoveMust, Supports: ">=1.36 <1.38"},
			{Plugin: "dns", Current: "1.0.0", Target: "1.0.0", Move: action.MoveStays},
			{Plugin: "legacy", Current: "1.1.0", Move: action.MoveBlocked, Supports: ">=1.30 <1.38", Available: []string{"1.1.0 (needs >=1.30 <1.38)", "1.0.0 (needs <1.38)"}},
			{Plugin: "metrics", Current: "1.0.0", Target: "1.0.0", Move: action.MoveStays},
		}, unsatisfiable: "legacy: no version supports Kubernetes 1.38.0 (1.1.0 needs >=1.30 <1.38, 1.0.0 needs <1.38)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &action.Config{NoBuiltin: true, Env: func(string) (string, bool) { return "", false }}
			got, l := action.NewPlan(cfg).Upgrade(t.Context(), load(t, "testdata/k8supgrade/"+tc.file), semver.MustParse(tc.target))
			if got == nil {
				t.Fatal(l)
			}
			if got.From != "1.37.1" || got.To != tc.target {
				t.Errorf("from %s to %s", got.From, got.To)
			}
			if !reflect.DeepEqual(got.Plugins, tc.want) {
				t.Errorf("plugins:\n%+v\nwant:\n%+v", got.Plugins, tc.want)
			}
			if tc.unsatisfiable == "" {
				if l.HasFatal() || got.Unsatisfiable != "" {
					t.Errorf("unexpected error: %v %q", l, got.Unsatisfiable)
				}
				return
			}
			if !l.HasFatal() || !strings.Contains(got.Unsatisfiable, tc.unsatisfiable) || !strings.Contains(fmt.Sprint(l), "at Kubernetes "+tc.target) {
				t.Errorf("unsatisfiable = %q, diagnostics %v; want %q", got.Unsatisfiable, l, tc.unsatisfiable)
			}
		})
	}
}
