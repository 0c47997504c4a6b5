package expansion

import (
	"path"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

// CheckAllowed refuses every skip step, skipped check and delegated check of
// the package that the site's allowlist does not list (a cluster file's
// spec.expansions.allow, in the file named policy); nil allows everything.
// Each refusal is an error at its field of the package's expansion.yaml, naming
// the expansion, what it skips and where the allowlist is.
func (p *Package) CheckAllowed(allow *v1alpha1.ExpansionAllow, policy string) diag.List {
	return p.CheckAllowedAt(allow, policy, "spec.expansions.allow")
}

// CheckAllowedAt is [Package.CheckAllowed] with the allowlist at field of
// policy (the controller's spec.expansionSite.allow of a resource).
func (p *Package) CheckAllowedAt(allow *v1alpha1.ExpansionAllow, policy, field string) diag.List {
	var l diag.List
	if allow == nil || p.Manifest == nil {
		return l
	}
	name := p.Manifest.Metadata.Name
	s := p.Manifest.Spec
	refuse := func(ptr, what, entry, list string, allowed []string) {
		says := "it allows none"
		if len(allowed) > 0 {
			says = "it allows " + strings.Join(allowed, ", ")
		}
		p.doc.Errorf(&l, ptr, "expansion %s %s %s, which the site's allowlist does not allow (%s: %s.%s; %s)", name, what, entry, policy, field, list, says)
	}
	for i, st := range s.SkipSteps {
		if !allowed(allow.SkipSteps, st) {
			refuse("/spec/skipSteps/"+strconv.Itoa(i), "skips step", st, "skipSteps", allow.SkipSteps)
		}
	}
	for i, c := range s.SkipConditions {
		if !allowed(allow.SkipConditions, c) {
			refuse("/spec/skipConditions/"+strconv.Itoa(i), "skips check", c, "skipConditions", allow.SkipConditions)
		}
	}
	for i, d := range s.DelegateConditions {
		if !allowed(allow.DelegateConditions, d.Check) {
			refuse("/spec/delegateConditions/"+strconv.Itoa(i)+"/check", "delegates check", d.Check+" to operator "+d.Operator, "delegateConditions", allow.DelegateConditions)
		}
	}
	return l
}

// CheckAllowed is [Package.CheckAllowed] for every expansion of the set.
func (s *Set) CheckAllowed(allow *v1alpha1.ExpansionAllow, policy string) diag.List {
	var l diag.List
	for _, e := range s.Expansions {
		l = append(l, e.CheckAllowed(allow, policy)...)
	}
	l.Sort()
	return l
}

// allowed says whether name matches an entry of list: equal, or matching it
// as a path.Match pattern.
func allowed(list []string, name string) bool {
	for _, a := range list {
		if a == name {
			return true
		}
		if ok, err := path.Match(a, name); err == nil && ok {
			return true
		}
	}
	return false
}
