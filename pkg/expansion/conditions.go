package expansion

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

// The resource an operator sets a delegated condition on: a cluster-scoped
// SiteCondition named after the operator, created by the expansion's plugin,
// whose status.conditions the operator owns.
const (
	ConditionGroup      = "expansion.kubeplug.dev"
	ConditionVersion    = "v1alpha1"
	ConditionKind       = "SiteCondition"
	ConditionResource   = "siteconditions"
	ConditionAPIVersion = ConditionGroup + "/" + ConditionVersion
	// DefaultDelegateTimeout is how long kubeplug waits for a delegated condition
	// when the expansion gives no timeout.
	DefaultDelegateTimeout = "10m"
)

// conditionCRD is the SiteCondition CRD.
const conditionCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: siteconditions.expansion.kubeplug.dev
spec:
  group: expansion.kubeplug.dev
  scope: Cluster
  names: {kind: SiteCondition, listKind: SiteConditionList, plural: siteconditions, singular: sitecondition}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        description: A site operator's conditions, which kubeplug waits for instead of running the checks an expansion delegates.
        properties:
          spec:
            type: object
            properties:
              expansion: {type: string}
              conditions:
                type: array
                description: The condition types kubeplug waits for.
                items: {type: string}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`

// delegations lists the expansion's delegated conditions by operator, sorted.
func delegations(m *v1alpha1.Expansion) map[string][]string {
	out := map[string][]string{}
	for _, d := range m.Spec.DelegateConditions {
		if !slices.Contains(out[d.Operator], d.Condition) {
			out[d.Operator] = append(out[d.Operator], d.Condition)
		}
	}
	return out
}

// conditionObjects is the SiteCondition objects of an expansion (and the CRD
// when withCRD), as one YAML stream.
func conditionObjects(m *v1alpha1.Expansion, withCRD bool) string {
	var b strings.Builder
	if withCRD {
		b.WriteString(conditionCRD)
	}
	ds := delegations(m)
	for _, op := range sortedKeys(ds) {
		if b.Len() > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, "apiVersion: %s\nkind: %s\nmetadata:\n  name: %s\nspec:\n  expansion: %s\n  conditions: [%s]\n",
			ConditionAPIVersion, ConditionKind, op, m.Metadata.Name, strings.Join(ds[op], ", "))
	}
	return b.String()
}

// CheckNames checks that every check the expansions skip or delegate is one
// of the plan's: checks maps each planned plugin to its checks' names.
func (s *Set) CheckNames(checks map[string][]string) diag.List {
	var l diag.List
	known := func(name string) string {
		if strings.HasPrefix(name, ProviderPrefix) {
			return "" // CheckProviderNames
		}
		p, c, _ := strings.Cut(name, "/")
		names, ok := checks[p]
		switch {
		case !ok:
			return fmt.Sprintf("plugin %s is not in the plan", p)
		case !slices.Contains(names, c):
			return fmt.Sprintf("plugin %s has no validate check %q (it has: %s)", p, c, strings.Join(names, ", "))
		}
		return ""
	}
	for _, e := range s.Expansions {
		for i, c := range e.Manifest.Spec.SkipConditions {
			if msg := known(c); msg != "" {
				e.doc.Errorf(&l, "/spec/skipConditions/"+strconv.Itoa(i), "%s", msg)
			}
		}
		for i, d := range e.Manifest.Spec.DelegateConditions {
			if msg := known(d.Check); msg != "" {
				e.doc.Errorf(&l, "/spec/delegateConditions/"+strconv.Itoa(i)+"/check", "%s", msg)
			}
		}
	}
	return l
}

// Checks returns plugin's validate checks as the expansions change them:
// a skipped check is left out (and reported in skipped), a delegated one
// becomes a wait for its operator's condition on the operator's SiteCondition,
// named so that a timeout says which operator did not set which condition.
// changed reports whether anything changed.
func (s *Set) Checks(plugin string, checks []v1alpha1.Check) (out []v1alpha1.Check, skipped []string, changed bool) {
	for _, c := range checks {
		id := plugin + "/" + c.Name
		if by, ok := s.skippedBy(id); ok {
			what := fmt.Sprintf("validate check %q of plugin %s", c.Name, plugin)
			if plugin+"/" == ProviderPrefix {
				what = fmt.Sprintf("readiness condition %q of the cluster's provider", c.Name)
			}
			skipped = append(skipped, fmt.Sprintf("%s not run: expansion %s skips it (skipConditions)", what, by))
			changed = true
			continue
		}
		if d, by, ok := s.delegated(id); ok {
			timeout := d.Timeout
			if timeout == "" {
				timeout = DefaultDelegateTimeout
			}
			out = append(out, v1alpha1.Check{
				Name: fmt.Sprintf("%s (delegated by expansion %s to operator %s: condition %s on %s %s)", c.Name, by, d.Operator, d.Condition, ConditionKind, d.Operator),
				Wait: &v1alpha1.ObjectWait{
					ObjectRef: v1alpha1.ObjectRef{APIVersion: ConditionAPIVersion, Kind: ConditionKind, Name: d.Operator},
					Condition: d.Condition, Timeout: timeout,
				},
			})
			changed = true
			continue
		}
		out = append(out, c)
	}
	return out, skipped, changed
}

func (s *Set) skippedBy(id string) (string, bool) {
	for _, e := range s.Expansions {
		if slices.Contains(e.Manifest.Spec.SkipConditions, id) {
			return e.Manifest.Metadata.Name, true
		}
	}
	return "", false
}

func (s *Set) delegated(id string) (v1alpha1.DelegatedCondition, string, bool) {
	for _, e := range s.Expansions {
		for _, d := range e.Manifest.Spec.DelegateConditions {
			if d.Check == id {
				return d, e.Manifest.Metadata.Name, true
			}
		}
	}
	return v1alpha1.DelegatedCondition{}, "", false
}
