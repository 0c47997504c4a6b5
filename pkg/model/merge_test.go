package model_test

import (
	"strings"
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

// TestServedGroupConflicts: an API group is routed to one place only — two
// plugins' APIServices, or an APIService and a CRD, serving one group are a
// fatal diagnostic naming both; CRDs of one group from several plugins, and one
// plugin's several versions, are fine.
func TestServedGroupConflicts(t *testing.T) {
	apiService := func(version, group string) model.Object {
		return model.Object{Object: map[string]any{"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": version + "." + group},
			"spec":     map[string]any{"group": group, "version": version, "service": map[string]any{"namespace": "n", "name": "s"}}}}
	}
	crd := func(plural, group string) model.Object {
		return model.Object{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": plural + "." + group}, "spec": map[string]any{"group": group}}}
	}
	add := func(objs ...model.Object) *model.Contribution {
		return &model.Contribution{Kubernetes: &model.Kubernetes{Objects: objs}}
	}
	for _, tc := range []struct {
		name  string
		adds  [][2]any // plugin, contribution
		wants string   // "" for no diagnostic
	}{
		{"one plugin's versions", [][2]any{{"a", add(apiService("v1", "x.io"), apiService("v2", "x.io"))}}, ""},
		{"CRDs of one group from two plugins", [][2]any{{"a", add(crd("as", "x.io"))}, {"b", add(crd("bs", "x.io"))}}, ""},
		{"two plugins' APIServices", [][2]any{{"a", add(apiService("v1", "x.io"))}, {"b", add(apiService("v2", "x.io"))}},
			"API group x.io is served by APIService v1.x.io of plugin a and by APIService v2.x.io of plugin b"},
		{"a CRD then an APIService", [][2]any{{"a", add(crd("things", "x.io"))}, {"b", add(apiService("v1", "x.io"))}},
			"API group x.io is served by CustomResourceDefinition things.x.io of plugin a and by APIService v1.x.io of plugin b"},
		{"one plugin's CRD and APIService", [][2]any{{"a", add(apiService("v1", "x.io"), crd("things", "x.io"))}},
			"by APIService v1.x.io of plugin a and by CustomResourceDefinition things.x.io of plugin a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := model.New()
			var l diag.List
			for _, a := range tc.adds {
				l = append(l, m.Add(a[0].(string), a[1].(*model.Contribution))...)
			}
			switch {
			case tc.wants == "" && len(l) > 0:
				t.Fatalf("diagnostics = %v, want none", l)
			case tc.wants != "" && (len(l) != 1 || !l.HasFatal() || !strings.Contains(l[0].Message, tc.wants)):
				t.Fatalf("diagnostics = %v, want one fatal saying %q", l, tc.wants)
			}
		})
	}
}
