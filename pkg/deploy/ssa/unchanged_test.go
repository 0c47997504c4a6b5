package ssa_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/pkg/deploy/internal/deploytest"
	"github.com/kubeplug/kubeplug/pkg/deploy/ssa"
)

// TestUnchangedDetectsChangedCRDAndHonoursIgnoredPaths: a CRD whose content changed
// is never skipped, nor an object whose last applied digest the record does not
// keep, and a field another manager owns by the plugin's declaration does not
// make an object look changed.
func TestUnchangedDetectsChangedCRDAndHonoursIgnoredPaths(t *testing.T) {
	desired := &unstructured.Unstructured{Object: deploytest.CRD(t, deploytest.WidgetsV1, func(m map[string]any) { delete(m, "status") })}
	applied := ssa.Digest(desired) // what the record keeps
	live := desired.DeepCopy()
	if !ssa.Unchanged(desired, live, applied, applied, nil) {
		t.Fatal("identical CRD reported changed")
	}
	if ssa.Unchanged(desired, live, applied, "", nil) {
		t.Error("an object whose record keeps no digest was skipped as unchanged")
	}
	next := &unstructured.Unstructured{Object: deploytest.CRD(t, deploytest.WidgetsV1, func(m map[string]any) {
		delete(m, "status")
		delete(deploytest.V1Spec(m, 0)["properties"].(map[string]any), "mode")
	})}
	if ssa.Unchanged(next, live, ssa.Digest(next), applied, nil) {
		t.Error("a CRD with a field removed was skipped as unchanged")
	}

	dep := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx:1"}}}}},
	}}
	d := ssa.Digest(dep)
	scaled := dep.DeepCopy()
	_ = unstructured.SetNestedField(scaled.Object, int64(7), "spec", "replicas")
	rules := []ssa.Ignore{{Kind: "Deployment", Paths: []string{"/spec/replicas"}}}
	if ssa.Unchanged(dep, scaled, d, d, nil) {
		t.Error("scaled Deployment reported unchanged without an ignore rule")
	}
	if !ssa.Unchanged(dep, scaled, d, d, ssa.IgnoredPaths(rules, dep)) {
		t.Error("scaled Deployment reported changed although /spec/replicas is ignored")
	}
	edited := scaled.DeepCopy()
	containers, _, _ := unstructured.NestedSlice(edited.Object, "spec", "template", "spec", "containers")
	containers[0].(map[string]any)["image"] = "nginx:2"
	_ = unstructured.SetNestedSlice(edited.Object, containers, "spec", "template", "spec", "containers")
	if ssa.Unchanged(dep, edited, d, d, ssa.IgnoredPaths(rules, dep)) {
		t.Error("an edited image was ignored along with /spec/replicas")
	}
	if got := ssa.IgnoredPaths([]ssa.Ignore{{Kind: "Deployment", Name: "other", Paths: []string{"/spec/replicas"}}}, dep); got != nil {
		t.Errorf("a rule for another object matched: %v", got)
	}
}
