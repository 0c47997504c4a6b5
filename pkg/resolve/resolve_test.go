package resolve

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
)

// pkg builds a package from "name version" and options.
func pkg(id string, opts ...func(*Package)) *Package {
	name, ver, _ := strings.Cut(id, " ")
	p := &Package{Name: name, Version: semver.MustParse(ver)}
	for _, o := range opts {
		o(p)
	}
	return p
}

// requirement parses "name [constraint]".
func requirement(s string) Requirement {
	name, c, _ := strings.Cut(s, " ")
	r := Requirement{Name: name}
	if c != "" {
		r.Constraint = mustConstraint(c)
	}
	return r
}

func mustConstraint(s string) *semver.Constraints {
	c, err := semver.NewConstraint(s)
	if err != nil {
		panic(err)
	}
	return c
}

func requires(rs ...string) func(*Package) {
	return func(p *Package) {
		for _, r := range rs {
			p.Requires = append(p.Requires, requirement(r))
		}
	}
}

func after(names ...string) func(*Package)     { return func(p *Package) { p.After = names } }
func before(names ...string) func(*Package)    { return func(p *Package) { p.Before = names } }
func conflicts(names ...string) func(*Package) { return func(p *Package) { p.Conflicts = names } }
func providers(names ...string) func(*Package) { return func(p *Package) { p.Providers = names } }
func kube(c string) func(*Package) {
	return func(p *Package) { p.KubernetesVersion = mustConstraint(c) }
}

func enable(rs ...string) []Requirement {
	out := make([]Requirement, len(rs))
	for i, r := range rs {
		out[i] = requirement(r)
	}
	return out
}

// waves renders a result as "a@1.0.0 b@1.0.0 | c@2.0.0".
func waves(r *Result) string {
	var ws []string
	for _, w := range r.Waves {
		var ps []string
		for _, p := range w {
			ps = append(ps, p.Name+"@"+p.Version.String())
		}
		ws = append(ws, strings.Join(ps, " "))
	}
	return strings.Join(ws, " | ")
}

type resolveCase struct {
	name    string
	pkgs    []*Package
	enabled []string
	kube    string
	// provider is Request.Provider.
	provider string
	order    []string
	// prefer is Request.Prefer as "name version" entries.
	prefer []string
	want   string // waves, when no error is expected
	// after, when set, is the result's After rendered by afterString.
	after   string
	wantErr string // exact message
	wantIs  error
}

func (tc resolveCase) request() Request {
	req := Request{Enabled: enable(tc.enabled...), Order: tc.order, Provider: tc.provider}
	for _, p := range tc.prefer {
		name, v, _ := strings.Cut(p, " ")
		if req.Prefer == nil {
			req.Prefer = map[string]*semver.Version{}
		}
		req.Prefer[name] = semver.MustParse(v)
	}
	if tc.kube != "" {
		req.KubernetesVersion = semver.MustParse(tc.kube)
	}
	return req
}

func runCases(t *testing.T, cases []resolveCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Resolve(context.Background(), NewCatalog(tc.pkgs...), tc.request())
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Resolve() = %q, want error %q", waves(res), tc.wantErr)
				}
				if err.Error() != tc.wantErr {
					t.Errorf("Resolve() error\n got: %s\nwant: %s", err, tc.wantErr)
				}
				if !errors.Is(err, tc.wantIs) {
					t.Errorf("errors.Is(%v, %v) = false", err, tc.wantIs)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve() error: %v", err)
			}
			if got := waves(res); got != tc.want {
				t.Errorf("Resolve() waves\n got: %s\nwant: %s", got, tc.want)
			}
			var flat []*Package
			for _, w := range res.Waves {
				flat = append(flat, w...)
			}
			if fmt.Sprint(flat) != fmt.Sprint(res.Plugins) {
				t.Errorf("Plugins %v is not Waves flattened %v", res.Plugins, flat)
			}
			checkAfter(t, res)
			if got := afterString(res); tc.after != "" && got != tc.after {
				t.Errorf("Resolve() After\n got: %s\nwant: %s", got, tc.after)
			}
		})
	}
}

// checkAfter holds a result's After to its waves: what a plugin waits for is
// all in earlier waves, and at least one of it in the wave just before (else
// the plugin would have been placed earlier); a wave-0 plugin waits for nothing.
func checkAfter(t *testing.T, res *Result) {
	t.Helper()
	waveOf := map[string]int{}
	for w, ps := range res.Waves {
		for _, p := range ps {
			waveOf[p.Name] = w
		}
	}
	for name := range res.After {
		if _, ok := waveOf[name]; !ok {
			t.Errorf("After has %s, which is not in the result", name)
		}
	}
	for w, ps := range res.Waves {
		for _, p := range ps {
			before := false
			for _, a := range res.After[p.Name] {
				aw, ok := waveOf[a]
				switch {
				case !ok:
					t.Errorf("%s waits for %s, which is not in the result", p.Name, a)
				case aw >= w:
					t.Errorf("%s (wave %d) waits for %s (wave %d)", p.Name, w, a, aw)
				case aw == w-1:
					before = true
				}
			}
			if w > 0 && !before {
				t.Errorf("%s is in wave %d but waits for nothing in wave %d: %v", p.Name, w, w-1, res.After[p.Name])
			}
		}
	}
}

// afterString renders a result's After as "a<b,c d<a", by plugin name.
func afterString(res *Result) string {
	var out []string
	for _, p := range res.Plugins {
		if as := res.After[p.Name]; len(as) > 0 {
			out = append(out, p.Name+"<"+strings.Join(as, ","))
		}
	}
	return strings.Join(out, " ")
}

func TestResolveGraphs(t *testing.T) {
	runCases(t, []resolveCase{
		{
			name:    "single plugin",
			pkgs:    []*Package{pkg("a 1.0.0")},
			enabled: []string{"a"},
			want:    "a@1.0.0",
		},
		{
			name:    "nothing enabled",
			pkgs:    []*Package{pkg("a 1.0.0")},
			enabled: nil,
			want:    "",
		},
		{
			name:    "simple chain",
			pkgs:    []*Package{pkg("a 1.0.0", requires("b")), pkg("b 1.0.0", requires("c")), pkg("c 1.0.0")},
			enabled: []string{"a"},
			want:    "c@1.0.0 | b@1.0.0 | a@1.0.0",
		},
		{
			name: "diamond",
			pkgs: []*Package{
				pkg("a 1.0.0", requires("c", "b")), pkg("b 1.0.0", requires("d")),
				pkg("c 1.0.0", requires("d")), pkg("d 1.0.0"),
			},
			enabled: []string{"a"},
			want:    "d@1.0.0 | b@1.0.0 c@1.0.0 | a@1.0.0",
			after:   "b<d c<d a<b,c",
		},
		{
			name: "transitive requires pull in only what is needed",
			pkgs: []*Package{
				pkg("app 1.0.0", requires("db ^2")), pkg("db 2.1.0", requires("storage >=1.2")),
				pkg("storage 1.3.0"), pkg("storage 1.1.0"), pkg("unrelated 1.0.0"),
			},
			enabled: []string{"app"},
			want:    "storage@1.3.0 | db@2.1.0 | app@1.0.0",
		},
		{
			name:    "independent plugins share a wave",
			pkgs:    []*Package{pkg("c 1.0.0"), pkg("a 1.0.0"), pkg("b 1.0.0")},
			enabled: []string{"c", "a", "b"},
			want:    "a@1.0.0 b@1.0.0 c@1.0.0",
		},
		{
			name:    "after hint orders when the other plugin is selected",
			pkgs:    []*Package{pkg("a 1.0.0", after("b")), pkg("b 1.0.0")},
			enabled: []string{"a", "b"},
			want:    "b@1.0.0 | a@1.0.0",
		},
		{
			name:    "after hint does not pull a plugin in",
			pkgs:    []*Package{pkg("a 1.0.0", after("b")), pkg("b 1.0.0")},
			enabled: []string{"a"},
			want:    "a@1.0.0",
		},
		{
			name:    "before hint orders when the other plugin is selected",
			pkgs:    []*Package{pkg("a 1.0.0"), pkg("z 1.0.0", before("a"))},
			enabled: []string{"a", "z"},
			want:    "z@1.0.0 | a@1.0.0",
			after:   "a<z",
		},
		{
			name:    "before hint naming an unknown plugin is ignored",
			pkgs:    []*Package{pkg("a 1.0.0", before("ghost")), pkg("b 1.0.0")},
			enabled: []string{"a", "b"},
			want:    "a@1.0.0 b@1.0.0",
		},
		{
			name:    "order list first, in its order, the rest after",
			pkgs:    []*Package{pkg("a 1.0.0"), pkg("b 1.0.0"), pkg("c 1.0.0"), pkg("d 1.0.0", requires("a"))},
			enabled: []string{"a", "b", "c", "d"},
			order:   []string{"c", "b"},
			want:    "c@1.0.0 | b@1.0.0 | a@1.0.0 | d@1.0.0",
			after:   "b<c a<b,c d<a,b,c",
		},
		{
			name:    "order list may name plugins that are not selected",
			pkgs:    []*Package{pkg("a 1.0.0"), pkg("b 1.0.0")},
			enabled: []string{"a", "b"},
			order:   []string{"cni", "b"},
			want:    "b@1.0.0 | a@1.0.0",
		},
		{
			name:    "order list with dependencies among listed plugins",
			pkgs:    []*Package{pkg("cni 1.0.0"), pkg("cert-manager 1.0.0", requires("cni")), pkg("dex 1.0.0")},
			enabled: []string{"cert-manager", "dex"},
			order:   []string{"cni", "cert-manager"},
			want:    "cni@1.0.0 | cert-manager@1.0.0 | dex@1.0.0",
			after:   "cert-manager<cni dex<cert-manager,cni",
		},
	})
}

func TestResolveVersions(t *testing.T) {
	runCases(t, []resolveCase{
		{
			name:    "highest version",
			pkgs:    []*Package{pkg("a 1.0.0"), pkg("a 2.0.0"), pkg("a 1.5.0")},
			enabled: []string{"a"},
			want:    "a@2.0.0",
		},
		{
			name:    "highest version satisfying the request",
			pkgs:    []*Package{pkg("a 1.0.0"), pkg("a 2.0.0"), pkg("a 1.5.0")},
			enabled: []string{"a ^1"},
			want:    "a@1.5.0",
		},
		{
			name:    "every constraint on a name applies",
			pkgs:    []*Package{pkg("a 1.0.0", requires("b <1.5")), pkg("b 1.0.0"), pkg("b 1.4.0"), pkg("b 1.6.0")},
			enabled: []string{"a", "b >=1.2"},
			want:    "b@1.4.0 | a@1.0.0",
		},
		{
			name:    "a name enabled twice gets both constraints",
			pkgs:    []*Package{pkg("a 1.0.0"), pkg("a 1.4.0"), pkg("a 2.0.0")},
			enabled: []string{"a >=1.2", "a <2"},
			want:    "a@1.4.0",
		},
		{
			name: "skips a version whose dependency no source provides",
			pkgs: []*Package{
				pkg("a 2.0.0", requires("b ^1")), pkg("a 1.0.0"),
				pkg("b 1.0.0", requires("missing")),
			},
			enabled: []string{"a"},
			want:    "a@1.0.0",
		},
		{
			name: "backtracks when the highest version leads to a dead end",
			pkgs: []*Package{
				pkg("a 2.0.0", requires("c ^2")), pkg("a 1.0.0", requires("c ^1")),
				pkg("b 1.0.0", requires("c ^1")),
				pkg("c 1.0.0"), pkg("c 2.0.0"),
			},
			enabled: []string{"a", "b"},
			want:    "c@1.0.0 | a@1.0.0 b@1.0.0",
		},
		{
			name: "backtracks over unrelated choices to the culprit",
			pkgs: []*Package{
				pkg("a 2.0.0", requires("c ^2")), pkg("a 1.0.0", requires("c ^1")),
				pkg("m 3.0.0"), pkg("m 2.0.0"), pkg("m 1.0.0"),
				pkg("n 2.0.0", requires("m")), pkg("n 1.0.0"),
				pkg("z 1.0.0", requires("c ^1")),
				pkg("c 1.0.0"), pkg("c 2.0.0"),
			},
			enabled: []string{"a", "m", "n", "z"},
			want:    "c@1.0.0 m@3.0.0 | a@1.0.0 n@2.0.0 z@1.0.0",
		},
		{
			name: "lowers a dependency selected too high for a later requirer",
			pkgs: []*Package{
				pkg("base 3.0.0"), pkg("base 2.5.0"), pkg("base 1.0.0"),
				pkg("zz 1.0.0", requires("base ^2")),
			},
			enabled: []string{"base", "zz"},
			want:    "base@2.5.0 | zz@1.0.0",
		},
		{
			name: "backtracks away from a conflict",
			pkgs: []*Package{
				pkg("a 2.0.0", conflicts("b")), pkg("a 1.0.0"),
				pkg("b 1.0.0"),
			},
			enabled: []string{"a", "b"},
			want:    "a@1.0.0 b@1.0.0",
		},
		{
			name: "backtracks away from a conflict declared by the other side",
			pkgs: []*Package{
				pkg("a 1.0.0"),
				pkg("b 2.0.0", conflicts("a")), pkg("b 1.0.0"),
			},
			enabled: []string{"a", "b"},
			want:    "a@1.0.0 b@1.0.0",
		},
		{
			name: "conflict with a plugin that is not selected does not bite",
			pkgs: []*Package{
				pkg("a 1.0.0", conflicts("other")), pkg("other 1.0.0"),
			},
			enabled: []string{"a"},
			want:    "a@1.0.0",
		},
		{
			name: "kubernetes version excludes the highest version",
			pkgs: []*Package{
				pkg("dex 1.4.0", kube(">=1.33")), pkg("dex 1.3.2", kube(">=1.31")), pkg("dex 1.2.0"),
			},
			enabled: []string{"dex"},
			kube:    "1.32.1",
			want:    "dex@1.3.2",
		},
		{
			name: "kubernetes version excludes a dependency's versions",
			pkgs: []*Package{
				pkg("dex 1.4.0", requires("cert-manager >=1.14")), pkg("dex 1.3.0", requires("cert-manager >=1.10")),
				pkg("cert-manager 1.14.0", kube(">=1.33")), pkg("cert-manager 1.12.0"),
			},
			enabled: []string{"dex"},
			kube:    "1.30.0",
			want:    "cert-manager@1.12.0 | dex@1.3.0",
		},
		{
			name:    "no kubernetes version skips the check",
			pkgs:    []*Package{pkg("dex 1.4.0", kube(">=1.33"))},
			enabled: []string{"dex"},
			want:    "dex@1.4.0",
		},
	})
}

// TestResolveProvider: a package's providers exclude its versions on other
// providers; when they exclude them all, the error names the plugin, who
// wants it and both providers.
func TestResolveProvider(t *testing.T) {
	runCases(t, []resolveCase{
		{
			name:     "the version for the cluster's provider",
			pkgs:     []*Package{pkg("a 2.0.0", providers("aws")), pkg("a 1.0.0")},
			enabled:  []string{"a"},
			provider: "local",
			want:     "a@1.0.0",
		},
		{
			name:     "a plugin for the cluster's provider",
			pkgs:     []*Package{pkg("a 1.0.0", providers("aws", "local"))},
			enabled:  []string{"a"},
			provider: "aws",
			want:     "a@1.0.0",
		},
		{
			name:     "enabled on another provider",
			pkgs:     []*Package{pkg("a 1.1.0", providers("aws")), pkg("a 1.0.0", providers("aws"))},
			enabled:  []string{"a"},
			provider: "local",
			wantErr:  "a (required by cluster) runs only on the aws provider (spec.providers), not on local: 1.1.0 runs on aws, 1.0.0 runs on aws",
			wantIs:   ErrProvider,
		},
		{
			name:     "required on another provider",
			pkgs:     []*Package{pkg("b 1.0.0", requires("a")), pkg("a 1.0.0", providers("aws"))},
			enabled:  []string{"b"},
			provider: "local",
			wantErr:  "a (required by b 1.0.0) runs only on the aws provider (spec.providers), not on local: 1.0.0 runs on aws",
			wantIs:   ErrProvider,
		},
		{
			name:    "no provider skips the check",
			pkgs:    []*Package{pkg("a 1.0.0", providers("aws"))},
			enabled: []string{"a"},
			want:    "a@1.0.0",
		},
	})
}

// TestResolvePrefer: a preferred version (a lock's pin) wins over higher ones
// while every constraint admits it; otherwise the highest that can be picked
// does, as without a preference.
func TestResolvePrefer(t *testing.T) {
	runCases(t, []resolveCase{
		{
			name:    "the preferred version over a higher one",
			pkgs:    []*Package{pkg("a 1.0.0"), pkg("a 1.1.0"), pkg("a 2.0.0")},
			enabled: []string{"a"},
			prefer:  []string{"a 1.0.0"},
			want:    "a@1.0.0",
		},
		{
			name:    "a required plugin keeps its preferred version",
			pkgs:    []*Package{pkg("app 1.0.0", requires("lib ^1")), pkg("lib 1.0.0"), pkg("lib 1.1.0")},
			enabled: []string{"app"},
			prefer:  []string{"lib 1.0.0", "app 1.0.0"},
			want:    "lib@1.0.0 | app@1.0.0",
		},
		{
			name:    "only the names preferred are held",
			pkgs:    []*Package{pkg("app 1.0.0", requires("lib ^1")), pkg("app 1.1.0", requires("lib ^1")), pkg("lib 1.0.0"), pkg("lib 1.1.0")},
			enabled: []string{"app"},
			prefer:  []string{"app 1.0.0"},
			want:    "lib@1.1.0 | app@1.0.0",
		},
		{
			name:    "a constraint that excludes the preferred version",
			pkgs:    []*Package{pkg("a 1.0.0"), pkg("a 2.0.0"), pkg("a 2.1.0")},
			enabled: []string{"a ^2"},
			prefer:  []string{"a 1.0.0"},
			want:    "a@2.1.0",
		},
		{
			name:    "a preferred version no source holds",
			pkgs:    []*Package{pkg("a 1.0.0"), pkg("a 2.0.0")},
			enabled: []string{"a"},
			prefer:  []string{"a 1.5.0"},
			want:    "a@2.0.0",
		},
		{
			name: "a preferred version that leads to a dead end",
			pkgs: []*Package{
				pkg("a 1.0.0", requires("c ^1")), pkg("a 2.0.0", requires("c ^2")), pkg("a 3.0.0", requires("c ^2")),
				pkg("b 1.0.0", requires("c ^2")), pkg("c 1.0.0"), pkg("c 2.0.0"),
			},
			enabled: []string{"a", "b"},
			prefer:  []string{"a 1.0.0"},
			want:    "c@2.0.0 | a@3.0.0 b@1.0.0",
		},
		{
			name:    "a preferred version the Kubernetes version refuses",
			pkgs:    []*Package{pkg("a 1.0.0", kube("<1.30")), pkg("a 2.0.0")},
			enabled: []string{"a"},
			kube:    "1.33.0",
			prefer:  []string{"a 1.0.0"},
			want:    "a@2.0.0",
		},
	})
}

func TestResolveErrors(t *testing.T) {
	runCases(t, []resolveCase{
		{
			name:    "enabled plugin missing",
			pkgs:    []*Package{pkg("a 1.0.0")},
			enabled: []string{"a", "dex ^1.4"},
			wantErr: "cluster requires dex ^1.4, which no source provides",
			wantIs:  ErrMissing,
		},
		{
			name:    "required plugin missing",
			pkgs:    []*Package{pkg("dex 1.4.0", requires("cert-manager >=1.14"))},
			enabled: []string{"dex"},
			wantErr: "dex 1.4.0 requires cert-manager >=1.14, which no source provides",
			wantIs:  ErrMissing,
		},
		{
			name:    "enabled plugin misspelt",
			pkgs:    []*Package{pkg("a 1.0.0"), pkg("dex 1.4.0"), pkg("dexter 1.0.0"), pkg("cert-manager 1.14.0")},
			enabled: []string{"a", "dxe"},
			wantErr: `cluster requires dxe, which no source provides; did you mean "dex"?`,
			wantIs:  ErrMissing,
		},
		{
			name:    "required plugin misspelt",
			pkgs:    []*Package{pkg("dex 1.4.0", requires("cert-manger >=1.14")), pkg("cert-manager 1.14.0")},
			enabled: []string{"dex"},
			wantErr: `dex 1.4.0 requires cert-manger >=1.14, which no source provides; did you mean "cert-manager"?`,
			wantIs:  ErrMissing,
		},
		{
			name: "unsatisfiable between request and a dependency",
			pkgs: []*Package{
				pkg("cert-manager 1.14.0", requires("dex <2.0")),
				pkg("dex 1.4.0"), pkg("dex 1.3.2"), pkg("dex 2.1.0"),
			},
			enabled: []string{"dex ^2.0", "cert-manager"},
			wantErr: "cannot pick a version of dex: cluster requires dex ^2.0; cert-manager 1.14.0 requires dex <2.0; available: 2.1.0, 1.4.0, 1.3.2",
			wantIs:  ErrUnsatisfiable,
		},
		{
			name:    "unsatisfiable request",
			pkgs:    []*Package{pkg("dex 1.4.0"), pkg("dex 1.3.2")},
			enabled: []string{"dex ^2"},
			wantErr: "cannot pick a version of dex: cluster requires dex ^2; available: 1.4.0, 1.3.2",
			wantIs:  ErrUnsatisfiable,
		},
		{
			name: "unsatisfiable together with the kubernetes version",
			pkgs: []*Package{
				pkg("dex 2.1.0", kube(">=1.33")), pkg("dex 1.4.0"), pkg("dex 1.3.2", kube("<1.20")),
			},
			enabled: []string{"dex ^2.0"},
			kube:    "1.30.0",
			wantErr: "cannot pick a version of dex: cluster requires dex ^2.0; available: 2.1.0, 1.4.0, 1.3.2; Kubernetes 1.30.0 excludes 2.1.0 (needs >=1.33), 1.3.2 (needs <1.20)",
			wantIs:  ErrUnsatisfiable,
		},
		{
			name: "two dependencies disagree",
			pkgs: []*Package{
				pkg("app 1.0.0", requires("a", "b")),
				pkg("a 1.0.0", requires("lib ^1")), pkg("b 1.0.0", requires("lib ^2")),
				pkg("lib 1.2.0"), pkg("lib 2.0.0"),
			},
			enabled: []string{"app"},
			wantErr: "cannot pick a version of lib: a 1.0.0 requires lib ^1; b 1.0.0 requires lib ^2; available: 2.0.0, 1.2.0",
			wantIs:  ErrUnsatisfiable,
		},
		{
			name: "dead end deep in the dependency tree",
			pkgs: []*Package{
				pkg("a 1.0.0", requires("b")), pkg("b 1.0.0", requires("c ^2")), pkg("c 1.0.0"),
			},
			enabled: []string{"a"},
			wantErr: "cannot pick a version of c: b 1.0.0 requires c ^2; available: 1.0.0",
			wantIs:  ErrUnsatisfiable,
		},
		{
			name:    "kubernetes version",
			pkgs:    []*Package{pkg("dex 1.4.0", kube(">=1.33")), pkg("dex 1.3.2", kube(">=1.31"))},
			enabled: []string{"dex"},
			kube:    "1.30.0",
			wantErr: "dex: no version supports Kubernetes 1.30.0 (1.4.0 needs >=1.33, 1.3.2 needs >=1.31)",
			wantIs:  ErrKubernetesVersion,
		},
		{
			name: "kubernetes version of a dependency",
			pkgs: []*Package{
				pkg("dex 1.4.0", requires("cert-manager")),
				pkg("cert-manager 1.14.0", kube(">=1.33")),
			},
			enabled: []string{"dex"},
			kube:    "1.30.0",
			wantErr: "cert-manager: no version supports Kubernetes 1.30.0 (1.14.0 needs >=1.33)",
			wantIs:  ErrKubernetesVersion,
		},
		{
			name:    "conflict between enabled plugins",
			pkgs:    []*Package{pkg("dex 1.4.0", conflicts("other-oidc")), pkg("other-oidc 1.0.0")},
			enabled: []string{"dex", "other-oidc"},
			wantErr: "dex 1.4.0 (required by cluster) conflicts with other-oidc (required by cluster)",
			wantIs:  ErrConflict,
		},
		{
			name:    "conflict declared by the later plugin",
			pkgs:    []*Package{pkg("dex 1.4.0"), pkg("other-oidc 1.0.0", conflicts("dex"))},
			enabled: []string{"dex", "other-oidc"},
			wantErr: "other-oidc 1.0.0 (required by cluster) conflicts with dex 1.4.0 (required by cluster)",
			wantIs:  ErrConflict,
		},
		{
			name: "conflict with a transitive dependency",
			pkgs: []*Package{
				pkg("dex 1.4.0", conflicts("other-oidc")),
				pkg("sso 2.0.0", requires("other-oidc")),
				pkg("other-oidc 1.0.0"),
			},
			enabled: []string{"dex", "sso"},
			wantErr: "dex 1.4.0 (required by cluster) conflicts with other-oidc (required by sso 2.0.0)",
			wantIs:  ErrConflict,
		},
		{
			name: "conflict with another plugin's dependency",
			pkgs: []*Package{
				pkg("a 1.0.0", requires("other-oidc")),
				pkg("sso 2.0.0", conflicts("other-oidc")),
				pkg("other-oidc 1.0.0"),
			},
			enabled: []string{"a", "sso"},
			wantErr: "sso 2.0.0 (required by cluster) conflicts with other-oidc 1.0.0 (required by a 1.0.0)",
			wantIs:  ErrConflict,
		},
		{
			name:    "requires cycle",
			pkgs:    []*Package{pkg("b 1.0.0", requires("a")), pkg("a 1.0.0", requires("b"))},
			enabled: []string{"b"},
			wantErr: "dependency cycle: a -> b -> a (a requires b; b requires a)",
			wantIs:  ErrCycle,
		},
		{
			name:    "self cycle",
			pkgs:    []*Package{pkg("a 1.0.0", requires("a"))},
			enabled: []string{"a"},
			wantErr: "dependency cycle: a -> a (a requires a)",
			wantIs:  ErrCycle,
		},
		{
			name: "cycle through hints",
			pkgs: []*Package{
				pkg("a 1.0.0", requires("b"), before("c")), pkg("b 1.0.0", after("c")), pkg("c 1.0.0"),
				pkg("z 1.0.0", requires("a")),
			},
			enabled: []string{"z", "c"},
			wantErr: "dependency cycle: a -> b -> c -> a (a requires b; b after c; a before c)",
			wantIs:  ErrCycle,
		},
		{
			name:    "cycle through the order list",
			pkgs:    []*Package{pkg("a 1.0.0", requires("b")), pkg("b 1.0.0"), pkg("c 1.0.0")},
			enabled: []string{"a", "c"},
			order:   []string{"a", "b"},
			wantErr: "dependency cycle: a -> b -> a (a requires b; order list puts a before b)",
			wantIs:  ErrCycle,
		},
		{
			name:    "order list contradicts a dependency",
			pkgs:    []*Package{pkg("cni 1.0.0", requires("flannel")), pkg("flannel 1.0.0")},
			enabled: []string{"cni"},
			order:   []string{"cni"},
			wantErr: "order list puts cni before every unlisted plugin, but cni requires flannel; add flannel to the order list before cni",
			wantIs:  ErrOrder,
		},
		{
			name:    "order list contradicts a hint",
			pkgs:    []*Package{pkg("cni 1.0.0"), pkg("flannel 1.0.0", before("cni"))},
			enabled: []string{"cni", "flannel"},
			order:   []string{"cni"},
			wantErr: "order list puts cni before every unlisted plugin, but flannel before cni; add flannel to the order list before cni",
			wantIs:  ErrOrder,
		},
		{
			name:    "order list names a plugin twice",
			pkgs:    []*Package{pkg("cni 1.0.0")},
			enabled: []string{"cni"},
			order:   []string{"cni", "x", "cni"},
			wantErr: "order list names cni twice",
			wantIs:  ErrOrder,
		},
	})
}

// TestMissingSuggestions checks that suggestions come only from a catalog that
// lists its names, and are in the error's fields.
func TestMissingSuggestions(t *testing.T) {
	pkgs := []*Package{pkg("dex 1.4.0")}
	req := Request{Enabled: []Requirement{{Name: "dxe"}}}
	for _, tc := range []struct {
		name string
		cat  Catalog
		want []string
	}{
		{"name lister", NewCatalog(pkgs...), []string{"dex"}},
		{"versions only", CatalogFunc(NewCatalog(pkgs...).Versions), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Resolve(context.Background(), tc.cat, req)
			var me *MissingError
			if !errors.As(err, &me) {
				t.Fatalf("err = %v, want a *MissingError", err)
			}
			if !slices.Equal(me.Suggestions, tc.want) {
				t.Errorf("Suggestions = %q, want %q", me.Suggestions, tc.want)
			}
		})
	}
}

// TestWantPackage: every want in an error names the requiring package, by the
// pointer the catalog returned, so that a caller can point at the requirement in
// that package's manifest; the cluster's own wants name none.
func TestWantPackage(t *testing.T) {
	a := pkg("a 1.0.0", requires("b >=2.0", "ghost"))
	cat := NewCatalog(a, pkg("b 1.0.0"))
	for _, tc := range []struct {
		name    string
		enabled []Requirement
		want    map[string]*Package // By -> Package
	}{
		{"unsatisfiable by a package", enable("a"), map[string]*Package{"a 1.0.0": a}},
		{"unsatisfiable by the cluster", enable("b >=3.0"), map[string]*Package{"cluster": nil}},
		{"missing", enable("a", "b"), map[string]*Package{"a 1.0.0": a}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Resolve(context.Background(), cat, Request{Enabled: tc.enabled})
			var ws []Want
			if ue, ok := errors.AsType[*UnsatisfiableError](err); ok {
				ws = ue.Wants
			} else if me, ok := errors.AsType[*MissingError](err); ok {
				ws = me.Wants
			} else {
				t.Fatalf("err = %v, want an unsatisfiable or missing error", err)
			}
			if len(ws) != len(tc.want) {
				t.Fatalf("Wants = %v, want %d", ws, len(tc.want))
			}
			for _, w := range ws {
				p, ok := tc.want[w.By]
				if !ok || w.Package != p {
					t.Errorf("want %v: Package = %v, want %v", w, w.Package, p)
				}
			}
		})
	}
}

func TestCycleErrorFields(t *testing.T) {
	cat := NewCatalog(pkg("b 1.0.0", requires("a")), pkg("a 1.0.0", requires("b")))
	_, err := Resolve(context.Background(), cat, Request{Enabled: enable("b")})
	var ce *CycleError
	if !errors.As(err, &ce) {
		t.Fatalf("Resolve() error = %v, want *CycleError", err)
	}
	if got, want := strings.Join(ce.Chain, ","), "a,b,a"; got != want {
		t.Errorf("Chain = %s, want %s", got, want)
	}
}

func TestResolveCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Resolve(ctx, NewCatalog(pkg("a 1.0.0")), Request{Enabled: enable("a")})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Resolve() error = %v, want context.Canceled", err)
	}
	if want := "resolving plugins: context canceled"; err.Error() != want {
		t.Errorf("Resolve() error = %q, want %q", err, want)
	}
}

// TestResolveDeterministic shuffles the catalog input, the enabled list and
// the order of each package's hint lists, and expects the same result.
func TestResolveDeterministic(t *testing.T) {
	cat, req := generate(benchConfig{plugins: 300, versions: 5, requested: 40, seed: 7})
	var all []*Package
	for _, vs := range cat.byName {
		all = append(all, vs...)
	}
	base, err := Resolve(context.Background(), cat, req)
	if err != nil {
		t.Fatal(err)
	}
	want := waves(base)
	if len(base.Plugins) < 40 {
		t.Fatalf("only %d plugins selected", len(base.Plugins))
	}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		enabled := append([]Requirement(nil), req.Enabled...)
		rng.Shuffle(len(enabled), func(i, j int) { enabled[i], enabled[j] = enabled[j], enabled[i] })
		res, err := Resolve(context.Background(), NewCatalog(all...), Request{Enabled: enabled})
		if err != nil {
			t.Fatal(err)
		}
		if got := waves(res); got != want {
			t.Fatalf("seed %d: result differs\n got: %s\nwant: %s", seed, got, want)
		}
	}
}

func TestNewCatalog(t *testing.T) {
	first := pkg("a 1.0.0")
	cat := NewCatalog(pkg("a 0.9.0"), first, pkg("a 2.0.0"), pkg("a 1.0.0"))
	vs := cat.Versions("a")
	if got := fmt.Sprint(vs); got != "[a 2.0.0 a 1.0.0 a 0.9.0]" {
		t.Errorf("Versions(a) = %s", got)
	}
	if vs[1] != first {
		t.Error("a duplicate version replaced the first one given")
	}
	if len(cat.Versions("b")) != 0 {
		t.Error("Versions(b) is not empty")
	}
}

func TestUnsortedCatalog(t *testing.T) {
	vs := []*Package{pkg("a 1.0.0"), pkg("a 3.0.0"), pkg("a 2.0.0")}
	cat := CatalogFunc(func(name string) []*Package {
		if name == "a" {
			return vs
		}
		return nil
	})
	res, err := Resolve(context.Background(), cat, Request{Enabled: enable("a")})
	if err != nil {
		t.Fatal(err)
	}
	if got := waves(res); got != "a@3.0.0" {
		t.Errorf("Resolve() = %s, want a@3.0.0", got)
	}
	if vs[0].Version.String() != "1.0.0" {
		t.Error("Resolve modified the catalog's slice")
	}
}

// TestResolveBackjumps would take 2^30 attempts if a failure were retried
// for every combination of the unrelated choices made since its cause.
func TestResolveBackjumps(t *testing.T) {
	pkgs := []*Package{
		pkg("a 2.0.0", requires("c ^2")), pkg("a 1.0.0", requires("c ^1")),
		pkg("z 1.0.0", requires("c ^1")),
		pkg("c 1.0.0"), pkg("c 2.0.0"),
	}
	enabled := []string{"a", "z"}
	for i := range 30 {
		name := fmt.Sprintf("m%02d", i)
		pkgs = append(pkgs, pkg(name+" 1.0.0"), pkg(name+" 2.0.0"))
		enabled = append(enabled, name)
	}
	res, err := Resolve(context.Background(), NewCatalog(pkgs...), Request{Enabled: enable(enabled...)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Plugins {
		want := "2.0.0"
		if p.Name == "a" || p.Name == "c" || p.Name == "z" {
			want = "1.0.0"
		}
		if p.Version.String() != want {
			t.Errorf("%s, want version %s", p, want)
		}
	}
}

func TestResolveCancelledDuringResolve(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inner := NewCatalog(pkg("a 1.0.0", requires("b")), pkg("b 1.0.0"))
	cat := CatalogFunc(func(name string) []*Package {
		if name == "b" {
			cancel()
		}
		return inner.Versions(name)
	})
	_, err := Resolve(ctx, cat, Request{Enabled: enable("a")})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Resolve() error = %v, want context.Canceled", err)
	}
}
