package ssa

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
)

// Stage is a step of a wave's apply: every object of a stage, across the wave's
// plugins, is applied (concurrently) before any object of the next one, and
// deletion goes through the stages in reverse.
type Stage int

// The stages of a wave, in apply order.
const (
	// StageDefinitions holds what other objects need to exist before they can be
	// applied at all: CustomResourceDefinitions (their custom resources) and
	// Namespaces (their namespaced objects).
	StageDefinitions Stage = iota
	// StageContent holds every object no rule names.
	StageContent
	// StageServing holds what sends the API server's requests to a plugin's
	// Service: an APIService or a webhook configuration applied before the rest of
	// the wave would have the API server call a server that is not there yet, and
	// fail (failurePolicy: Fail) the wave's own requests.
	StageServing
)

// Stages are the stages in apply order.
var Stages = []Stage{StageDefinitions, StageContent, StageServing}

// Rule places the objects of one kind in a stage.
type Rule struct {
	// Group and Kind match the objects ("" is the core group).
	Group, Kind string
	Stage       Stage
	// Established holds the next stage until the stage's objects of this kind are
	// Established (CustomResourceDefinitions: their kinds are served).
	Established bool
}

// Order is the ordering inside a wave, as data: kapp's change rules, reduced to
// what a plugin's content needs. A kind it does not name is in StageContent.
var Order = []Rule{
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition", Stage: StageDefinitions, Established: true},
	{Group: "", Kind: "Namespace", Stage: StageDefinitions},
	{Group: "apiregistration.k8s.io", Kind: "APIService", Stage: StageServing},
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration", Stage: StageServing},
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration", Stage: StageServing},
}

// RuleFor is the rule for a kind; the zero Rule in StageContent when none names it.
func RuleFor(gk schema.GroupKind) Rule {
	if i := slices.IndexFunc(Order, func(r Rule) bool { return r.Group == gk.Group && r.Kind == gk.Kind }); i >= 0 {
		return Order[i]
	}
	return Rule{Group: gk.Group, Kind: gk.Kind, Stage: StageContent}
}

// StageOf is the stage an object of kind gk is applied in.
func StageOf(gk schema.GroupKind) Stage { return RuleFor(gk).Stage }

// DeleteStages are the stages in deletion order: the reverse of Stages, so that
// nothing is routed to a deleted server and no object outlives its definition.
func DeleteStages() []Stage {
	out := slices.Clone(Stages)
	slices.Reverse(out)
	return out
}

func schemaGroupKind(r kube.ObjRef) schema.GroupKind {
	return schema.GroupKind{Group: r.Group, Kind: r.Kind}
}
