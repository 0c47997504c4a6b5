package model_test

import (
	"testing"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/model"
)

// TestConflictWith: a conflict Add reports names the plugin that set the key
// first; any other diagnostic names none.
func TestConflictWith(t *testing.T) {
	m := model.New()
	flag := func(v string) *model.Contribution {
		return &model.Contribution{ControlPlane: &model.ControlPlane{Components: map[string]*model.Component{
			model.KubeAPIServer: {Flags: map[string]model.Setting[string]{"v": {Value: v}}},
		}}}
	}
	if l := m.Add("a", flag("2")); len(l) != 0 {
		t.Fatal(l)
	}
	l := m.Add("b", flag("4"))
	if len(l) != 1 {
		t.Fatalf("diagnostics = %v, want one conflict", l)
	}
	if other, ok := model.ConflictWith(l[0]); !ok || other != "a" {
		t.Errorf("ConflictWith(%v) = %q, %v; want a", l[0], other, ok)
	}
	l = m.Add("c", &model.Contribution{ControlPlane: &model.ControlPlane{Components: map[string]*model.Component{"etcd": {}}}})
	for _, d := range append(l, diag.Diagnostic{Plugin: "b", Field: "x", Message: "plugins a and b set y to different values"}) {
		if other, ok := model.ConflictWith(d); ok {
			t.Errorf("ConflictWith(%v) = %q, want no conflict", d, other)
		}
	}
}
