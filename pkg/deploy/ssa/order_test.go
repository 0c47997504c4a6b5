package ssa_test

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeplug/kubeplug/pkg/deploy/ssa"
)

// TestOrder pins the ordering inside a wave: definitions first (CRDs waited for),
// APIServices and webhook configurations after everything else, deletion in
// reverse.
func TestOrder(t *testing.T) {
	for _, tc := range []struct {
		group, kind string
		stage       ssa.Stage
		established bool
	}{
		{"apiextensions.k8s.io", "CustomResourceDefinition", ssa.StageDefinitions, true},
		{"", "Namespace", ssa.StageDefinitions, false},
		{"", "ConfigMap", ssa.StageContent, false},
		{"apps", "Deployment", ssa.StageContent, false},
		{"", "Service", ssa.StageContent, false},
		{"example.com", "Widget", ssa.StageContent, false},
		// Same kind, another group: no rule.
		{"example.com", "Namespace", ssa.StageContent, false},
		{"example.com", "CustomResourceDefinition", ssa.StageContent, false},
		{"apiregistration.k8s.io", "APIService", ssa.StageServing, false},
		{"admissionregistration.k8s.io", "ValidatingWebhookConfiguration", ssa.StageServing, false},
		{"admissionregistration.k8s.io", "MutatingWebhookConfiguration", ssa.StageServing, false},
	} {
		t.Run(tc.group+"/"+tc.kind, func(t *testing.T) {
			gk := schema.GroupKind{Group: tc.group, Kind: tc.kind}
			if got := ssa.StageOf(gk); got != tc.stage {
				t.Errorf("stage %d, want %d", got, tc.stage)
			}
			if got := ssa.RuleFor(gk).Established; got != tc.established {
				t.Errorf("established %v, want %v", got, tc.established)
			}
		})
	}
	if want := []ssa.Stage{ssa.StageDefinitions, ssa.StageContent, ssa.StageServing}; !slices.Equal(ssa.Stages, want) {
		t.Errorf("stages %v, want %v", ssa.Stages, want)
	}
	if want := []ssa.Stage{ssa.StageServing, ssa.StageContent, ssa.StageDefinitions}; !slices.Equal(ssa.DeleteStages(), want) {
		t.Errorf("delete stages %v, want %v", ssa.DeleteStages(), want)
	}
	// Every rule names a kind once and a stage that exists.
	seen := map[schema.GroupKind]bool{}
	for _, r := range ssa.Order {
		gk := schema.GroupKind{Group: r.Group, Kind: r.Kind}
		if seen[gk] {
			t.Errorf("%s has two rules", gk)
		}
		seen[gk] = true
		if !slices.Contains(ssa.Stages, r.Stage) {
			t.Errorf("%s is in stage %d, which is not applied", gk, r.Stage)
		}
	}
}
