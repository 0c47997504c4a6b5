package provider

import (
	"slices"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/model"
)

// CreationStep is one named step of a provider's Up, in the order Up runs
// them. A site that provides a step itself may skip it with an expansion's
// `skipSteps: [provider/NAME]`, when the step is Skippable and the site's
// allowlist allows it (docs/expansions.md).
type CreationStep struct {
	// Name is a DNS label, unique among the provider's steps.
	Name string
	// Means says what the step does, for plan and for errors.
	Means string
	// Skippable says the cluster can come up without it when the site does it
	// itself. A step every later one depends on (the control plane) is not.
	Skippable bool
}

// Condition is one of the cluster's readiness conditions a provider declares:
// checked, as a plugin's validate check is, once the plugins are deployed
// (`up`'s step cluster-ready). An expansion may skip it
// (`skipConditions: [provider/NAME]`) or delegate it to a site operator
// (`delegateConditions: [{check: provider/NAME, …}]`) under the site's
// allowlist.
type Condition struct {
	// Name is a DNS label, unique among the provider's conditions.
	Name string
	// Means says what is checked.
	Means string
	// Check is how kubeplug checks it.
	Check v1alpha1.Check
	// Applies says whether the condition holds for a cluster of this model
	// (the DNS is ready only on a cluster that runs a DNS); nil: always.
	Applies func(m *model.Model) bool
}

// Steps is a provider's creation steps and readiness conditions as data.
type Steps struct {
	Steps      []CreationStep
	Conditions []Condition
}

// StepPrefix prefixes a provider's step or condition where an expansion names
// it (skipSteps, skipConditions, delegateConditions): provider/control-plane.
const StepPrefix = "provider/"

var steps = map[string]Steps{}

// RegisterSteps records the creation steps and readiness conditions of the
// provider registered as name, so that a run checks an expansion's skips and
// delegations against them before the provider exists. It panics on a second
// call for one name.
func RegisterSteps(name string, s Steps) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := steps[name]; dup {
		panic("provider: steps of " + name + " registered twice")
	}
	steps[name] = s
}

// StepsOf returns the creation steps and conditions of the provider spec
// names; the zero Steps for a provider that registered none.
func StepsOf(spec *v1alpha1.Provider) Steps {
	name, err := NameOf(spec)
	if err != nil {
		return Steps{}
	}
	mu.RLock()
	defer mu.RUnlock()
	return steps[name]
}

// Step returns the step named name.
func (s Steps) Step(name string) (CreationStep, bool) {
	i := slices.IndexFunc(s.Steps, func(c CreationStep) bool { return c.Name == name })
	if i < 0 {
		return CreationStep{}, false
	}
	return s.Steps[i], true
}

// StepNames returns the names of the steps, in order.
func (s Steps) StepNames() []string {
	out := make([]string, 0, len(s.Steps))
	for _, c := range s.Steps {
		out = append(out, c.Name)
	}
	return out
}

// SkippableNames returns the names of the steps a site may skip, in order.
func (s Steps) SkippableNames() []string {
	var out []string
	for _, c := range s.Steps {
		if c.Skippable {
			out = append(out, c.Name)
		}
	}
	return out
}

// ConditionNames returns the names of the conditions, in order.
func (s Steps) ConditionNames() []string {
	out := make([]string, 0, len(s.Conditions))
	for _, c := range s.Conditions {
		out = append(out, c.Name)
	}
	return out
}
