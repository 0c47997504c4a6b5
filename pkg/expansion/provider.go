package expansion

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/diag"
)

// ProviderSteps is what a run knows of its cluster's provider: its creation
// steps, those a site may skip, and its readiness conditions (pkg/provider's
// Steps, as names: this package does not link the providers).
type ProviderSteps struct {
	// Provider names it, for messages.
	Provider   string
	Steps      []string
	Skippable  []string
	Conditions []string
}

// CheckProviderNames checks every provider/NAME the expansions skip or
// delegate against the cluster's provider: a step must be one of its steps a
// site may skip, a condition one of its conditions. Each error is at the
// entry's field of its expansion.yaml, naming the expansion and listing what
// the provider has.
func (s *Set) CheckProviderNames(p ProviderSteps) diag.List {
	var l diag.List
	for _, e := range s.Expansions {
		l = append(l, e.CheckProviderNames(p)...)
	}
	l.Sort()
	return l
}

// CheckProviderNames is [Set.CheckProviderNames] for one package.
func (pkg *Package) CheckProviderNames(p ProviderSteps) diag.List {
	var l diag.List
	if pkg.Manifest == nil {
		return l
	}
	e := pkg
	list := func(names []string) string {
		if len(names) == 0 {
			return "none"
		}
		return strings.Join(names, ", ")
	}
	step := func(name string) string {
		switch {
		case slices.Contains(p.Skippable, name):
			return ""
		case slices.Contains(p.Steps, name):
			return fmt.Sprintf("the %s provider cannot create a cluster without its step %s (steps a site may skip: %s)", p.Provider, name, list(p.Skippable))
		}
		return fmt.Sprintf("the %s provider has no step %q (its steps: %s; a site may skip: %s)", p.Provider, name, list(p.Steps), list(p.Skippable))
	}
	cond := func(name string) string {
		if slices.Contains(p.Conditions, name) {
			return ""
		}
		return fmt.Sprintf("the %s provider has no readiness condition %q (it has: %s)", p.Provider, name, list(p.Conditions))
	}
	{
		m := e.Manifest.Spec
		for i, st := range m.SkipSteps {
			if n, ok := strings.CutPrefix(st, ProviderPrefix); ok {
				if msg := step(n); msg != "" {
					e.doc.Errorf(&l, "/spec/skipSteps/"+strconv.Itoa(i), "expansion %s skips step %s: %s", e.Manifest.Metadata.Name, st, msg)
				}
			}
		}
		for i, c := range m.SkipConditions {
			if n, ok := strings.CutPrefix(c, ProviderPrefix); ok {
				if msg := cond(n); msg != "" {
					e.doc.Errorf(&l, "/spec/skipConditions/"+strconv.Itoa(i), "expansion %s skips condition %s: %s", e.Manifest.Metadata.Name, c, msg)
				}
			}
		}
		for i, d := range m.DelegateConditions {
			if n, ok := strings.CutPrefix(d.Check, ProviderPrefix); ok {
				if msg := cond(n); msg != "" {
					e.doc.Errorf(&l, "/spec/delegateConditions/"+strconv.Itoa(i)+"/check", "expansion %s delegates condition %s: %s", e.Manifest.Metadata.Name, d.Check, msg)
				}
			}
		}
	}
	return l
}

// ProviderSkips returns the provider's steps the expansions skip (without
// ProviderPrefix), each with the first expansion that skips it; nil when none.
func (s *Set) ProviderSkips() map[string]string {
	var out map[string]string
	for _, e := range s.Expansions {
		for _, st := range e.Manifest.Spec.SkipSteps {
			n, ok := strings.CutPrefix(st, ProviderPrefix)
			if !ok {
				continue
			}
			if out == nil {
				out = map[string]string{}
			}
			if _, dup := out[n]; !dup {
				out[n] = e.Manifest.Metadata.Name
			}
		}
	}
	return out
}
