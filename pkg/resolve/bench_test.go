package resolve

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/Masterminds/semver/v3"
)

type benchConfig struct {
	plugins, versions, requested int
	seed                         uint64
	// upperBounds adds constraints such as ^2 and ~2.2 that exclude the
	// highest versions, so that popular plugins picked too high early have
	// to be lowered later (backjumping).
	upperBounds bool
}

// generate builds a catalog shaped like a plugin ecosystem: plugins sit in
// layers (a few base plugins such as CNIs and cert-manager, many apps on
// top), each version requires 0-4 plugins of lower layers, popular ones
// more often, with constraints like >=1.2 or ^2; some versions carry
// after/before hints that agree with the layering, some declare conflicts
// with top-layer plugins that are never selected, and the oldest versions
// refuse the cluster's Kubernetes version. The request enables plugins
// from the two top layers. Everything derives from seed.
func generate(cfg benchConfig) (*MapCatalog, Request) {
	rng := rand.New(rand.NewPCG(cfg.seed, 42))
	shares := []float64{0.01, 0.04, 0.15, 0.30, 0.50}
	var layers [][]string
	layerOf := map[string]int{}
	n := 0
	for l, sh := range shares {
		size := max(1, int(sh*float64(cfg.plugins)))
		if l == len(shares)-1 {
			size = cfg.plugins - n
		}
		var names []string
		for range size {
			name := fmt.Sprintf("p%d-%05d", l, n)
			names = append(names, name)
			layerOf[name] = l
			n++
		}
		layers = append(layers, names)
	}
	// Popular plugins first within a layer: index ~ size*u^2.
	pick := func(l int) string {
		u := rng.Float64()
		return layers[l][int(float64(len(layers[l]))*u*u)]
	}
	top := layers[len(layers)-1]
	requested := map[string]bool{}
	var req Request
	req.KubernetesVersion = semver.MustParse("1.31.0")
	candidates := append(append([]string(nil), layers[len(layers)-2]...), top...)
	for len(req.Enabled) < cfg.requested && len(requested) < len(candidates) {
		name := candidates[rng.IntN(len(candidates))]
		if requested[name] {
			continue
		}
		requested[name] = true
		req.Enabled = append(req.Enabled, Requirement{Name: name})
	}
	constraints := []string{">=1.2", ">=1.0", "<4", ">=2.0", "^1 || ^2 || ^3"}
	if cfg.upperBounds {
		constraints = append(constraints, "^2", "~2.2", ">=2.1 <3", "^2.1")
	}
	parsed := map[string]*semver.Constraints{}
	for _, c := range constraints {
		parsed[c] = mustConstraint(c)
	}
	old := mustConstraint("<1.25")
	recent := mustConstraint(">=1.28")

	var pkgs []*Package
	for l, names := range layers {
		for _, name := range names {
			var deps []string
			if l > 0 {
				seen := map[string]bool{}
				for range rng.IntN(5) {
					d := pick(rng.IntN(l))
					if !seen[d] {
						seen[d] = true
						deps = append(deps, d)
					}
				}
			}
			var conflict string
			if rng.IntN(50) == 0 {
				if c := top[rng.IntN(len(top))]; !requested[c] && c != name {
					conflict = c
				}
			}
			for k := range cfg.versions {
				p := &Package{Name: name, Version: semver.New(uint64(1+k/4), uint64(k%4), 0, "", "")}
				nd := len(deps)
				if k < 3 && nd > 0 {
					nd-- // old versions needed one plugin less
				}
				for _, d := range deps[:nd] {
					p.Requires = append(p.Requires, Requirement{Name: d, Constraint: parsed[constraints[rng.IntN(len(constraints))]]})
				}
				if l > 0 && rng.IntN(10) == 0 {
					p.After = []string{pick(rng.IntN(l))}
				}
				if l < len(layers)-1 && rng.IntN(20) == 0 {
					p.Before = []string{pick(l + 1 + rng.IntN(len(layers)-1-l))}
				}
				if conflict != "" {
					p.Conflicts = []string{conflict}
				}
				switch {
				case k == 0:
					p.KubernetesVersion = old
				case k >= cfg.versions-2:
					p.KubernetesVersion = recent
				}
				pkgs = append(pkgs, p)
			}
		}
	}
	return NewCatalog(pkgs...), req
}

func benchmarkResolve(b *testing.B, cfg benchConfig) {
	cat, req := generate(cfg)
	ctx := context.Background()
	var res *Result
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var err error
		if res, err = Resolve(ctx, cat, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(res.Plugins)), "plugins")
	b.ReportMetric(float64(len(res.Waves)), "waves")
}

// BenchmarkResolve resolves 200 requested plugins against 10,000 plugins x
// 10 versions (the design's target: < 100 ms per resolve).
func BenchmarkResolve(b *testing.B) {
	b.Run("lower-bounds", func(b *testing.B) {
		benchmarkResolve(b, benchConfig{plugins: 10000, versions: 10, requested: 200, seed: 1})
	})
	b.Run("upper-bounds", func(b *testing.B) {
		benchmarkResolve(b, benchConfig{plugins: 10000, versions: 10, requested: 200, seed: 1, upperBounds: true})
	})
}
