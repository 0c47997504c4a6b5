package resolve

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/Masterminds/semver/v3"
)

// TestResolveAgainstBruteForce compares Resolve with an exhaustive search on
// many small random catalogs: whenever some valid selection exists, Resolve
// must find one, and whatever it returns must be valid. This is what guards
// the pruning (feasibility memo, backjumping) against cutting off solutions.
func TestResolveAgainstBruteForce(t *testing.T) {
	kubeV := semver.MustParse("1.30.0")
	cons := []string{"", "^1", "^2", ">=1.1", "<2", "~1.0", ">=2.1"}
	vers := []string{"1.0.0", "1.1.0", "2.0.0", "2.1.0"}
	n := uint64(2000)
	if testing.Short() {
		n = 200
	}
	var solved, failed int
	defer func() { t.Logf("%d solved, %d failed", solved, failed) }()
	for seed := range n {
		rng := rand.New(rand.NewPCG(seed, 9))
		nNames := 2 + rng.IntN(4)
		names := make([]string, nNames)
		for i := range names {
			names[i] = string(rune('a' + i))
		}
		var pkgs []*Package
		for i, name := range names {
			for _, v := range vers {
				if rng.IntN(3) == 0 {
					continue
				}
				p := &Package{Name: name, Version: semver.MustParse(v)}
				// Requires only later names: no cycles, so a failure is
				// always about versions, never about ordering.
				for j := i + 1; j < nNames; j++ {
					if rng.IntN(3) == 0 {
						r := Requirement{Name: names[j]}
						if c := cons[rng.IntN(len(cons))]; c != "" {
							r.Constraint = mustConstraint(c)
						}
						p.Requires = append(p.Requires, r)
					}
				}
				if rng.IntN(6) == 0 {
					p.Conflicts = []string{names[rng.IntN(nNames)]}
				}
				if rng.IntN(6) == 0 {
					p.KubernetesVersion = mustConstraint(">=1.31")
				}
				pkgs = append(pkgs, p)
			}
		}
		var req Request
		req.KubernetesVersion = kubeV
		for _, name := range names {
			if rng.IntN(2) == 0 {
				r := Requirement{Name: name}
				if c := cons[rng.IntN(len(cons))]; c != "" {
					r.Constraint = mustConstraint(c)
				}
				req.Enabled = append(req.Enabled, r)
			}
		}
		cat := NewCatalog(pkgs...)
		res, err := Resolve(context.Background(), cat, req)
		exists := bruteForce(cat, names, req)
		if err != nil {
			failed++
		} else {
			solved++
		}
		switch {
		case err != nil && exists:
			t.Fatalf("seed %d: Resolve failed (%v) but a valid selection exists\n%s", seed, err, dump(pkgs, req))
		case err != nil && !isVersionError(err):
			t.Fatalf("seed %d: unexpected error kind %v", seed, err)
		case err == nil:
			sel := map[string]*Package{}
			for _, p := range res.Plugins {
				sel[p.Name] = p
			}
			if msg := invalid(sel, req); msg != "" {
				t.Fatalf("seed %d: Resolve returned an invalid selection: %s\n%s", seed, msg, dump(pkgs, req))
			}
		}
	}
}

// bruteForce reports whether any assignment of "absent or one version" to
// each name is valid.
func bruteForce(cat Catalog, names []string, req Request) bool {
	sel := map[string]*Package{}
	var rec func(i int) bool
	rec = func(i int) bool {
		if i == len(names) {
			return invalid(sel, req) == ""
		}
		delete(sel, names[i])
		if rec(i + 1) {
			return true
		}
		for _, p := range cat.Versions(names[i]) {
			sel[names[i]] = p
			if rec(i + 1) {
				return true
			}
		}
		delete(sel, names[i])
		return false
	}
	return rec(0)
}

// invalid says what is wrong with a selection, or "".
func invalid(sel map[string]*Package, req Request) string {
	ok := func(name string, c *semver.Constraints) bool {
		p := sel[name]
		return p != nil && (c == nil || c.Check(p.Version))
	}
	for _, r := range req.Enabled {
		if !ok(r.Name, r.Constraint) {
			return "enabled " + r.Name + " not satisfied"
		}
	}
	for _, p := range sel {
		if p.KubernetesVersion != nil && !p.KubernetesVersion.Check(req.KubernetesVersion) {
			return p.String() + " refuses kubernetes"
		}
		for _, r := range p.Requires {
			if !ok(r.Name, r.Constraint) {
				return p.String() + " requirement " + r.Name + " not satisfied"
			}
		}
		for _, c := range p.Conflicts {
			if c != p.Name && sel[c] != nil {
				return p.String() + " conflicts with " + c
			}
		}
	}
	return ""
}

func dump(pkgs []*Package, req Request) string {
	s := "request:"
	for _, r := range req.Enabled {
		s += fmt.Sprintf(" %s %v", r.Name, r.Constraint)
	}
	for _, p := range pkgs {
		s += fmt.Sprintf("\n%s requires=%v conflicts=%v kube=%v", p, p.Requires, p.Conflicts, p.KubernetesVersion)
	}
	return s
}

func isVersionError(err error) bool {
	for _, target := range []error{ErrMissing, ErrUnsatisfiable, ErrKubernetesVersion, ErrConflict} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
