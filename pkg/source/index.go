package source

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/internal/suggest"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// Index holds every visible version by name, newest first, and fetches them through
// the sources that listed them. It is safe for concurrent use.
type Index struct {
	byName map[string][]*Version
	names  []string
	// Shadowed lists versions hidden by a higher-precedence origin.
	Shadowed []*Version

	mu      sync.Mutex
	fetched map[*Version]*fetchEntry
}

// fetchEntry is one version's fetch: its lock makes concurrent fetches of one version
// load it once.
type fetchEntry struct {
	mu   sync.Mutex
	done bool
	pkg  *plugin.Package
	l    diag.List
}

// List lists the sources, in precedence order lowest first, and indexes what they
// hold. Diagnostics include every source's listing problems (broken manifests,
// unreadable directories), duplicates (fatal) and shadowing (warnings); the index
// holds every version that listed, even when some did not.
func List(ctx context.Context, sources ...Source) (*Index, diag.List) {
	var all []*Version
	var l diag.List
	for _, s := range sources {
		vs, sl := s.List(ctx)
		for _, v := range vs {
			v.source = s
		}
		all = append(all, vs...)
		l = append(l, sl...)
	}
	idx, il := index(all)
	return idx, append(l, il...)
}

// NewIndex indexes packages already loaded, as the source [Loaded] holds them,
// applying the shadowing and duplicate rules.
func NewIndex(pkgs []*plugin.Package) (*Index, diag.List) {
	return List(context.Background(), Loaded(pkgs...))
}

// index applies the shadowing and duplicate rules to listed versions.
func index(vs []*Version) (*Index, diag.List) {
	var l diag.List
	top := map[string]int{} // highest origin rank per name
	for _, v := range vs {
		if r, ok := top[v.Name]; !ok || v.Origin.Rank > r {
			top[v.Name] = v.Origin.Rank
		}
	}
	idx := &Index{byName: map[string][]*Version{}, fetched: map[*Version]*fetchEntry{}}
	seen := map[string]*Version{}
	shadower := map[string]*Version{}
	for _, v := range vs {
		if v.Origin.Rank < top[v.Name] {
			idx.Shadowed = append(idx.Shadowed, v)
			continue
		}
		if prev, dup := seen[v.ID()]; dup {
			l.Errorf(path.Join(v.Location, plugin.ManifestFile), 0, 0, "", "plugin %s is also at %s; each name and version may appear once per origin (%s)", v.ID(), prev.Location, v.Origin)
			continue
		}
		seen[v.ID()] = v
		shadower[v.Name] = v
		idx.byName[v.Name] = append(idx.byName[v.Name], v)
	}
	for _, s := range idx.Shadowed {
		w := shadower[s.Name]
		l.Warnf(path.Join(w.Location, plugin.ManifestFile), 0, 0, "", "%s plugin %s shadows the %s plugin %s at %s", w.Origin, w.Name, s.Origin, s.ID(), s.Location)
	}
	for name, vs := range idx.byName {
		slices.SortFunc(vs, func(a, b *Version) int { return b.Version.Compare(a.Version) })
		idx.names = append(idx.names, name)
	}
	slices.Sort(idx.names)
	slices.SortFunc(idx.Shadowed, func(a, b *Version) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), b.Version.Compare(a.Version))
	})
	return idx, l
}

// Names returns the plugin names, sorted.
func (i *Index) Names() []string { return i.names }

// Versions returns every version of name, newest first; nil when unknown.
func (i *Index) Versions(name string) []*Version { return i.byName[name] }

// All returns every visible version, by name then newest first.
func (i *Index) All() []*Version {
	var out []*Version
	for _, n := range i.names {
		out = append(out, i.byName[n]...)
	}
	return out
}

// Find returns the newest version of name matching the constraint (empty: any).
func (i *Index) Find(name, constraint string) (*Version, error) {
	vs := i.byName[name]
	if len(vs) == 0 {
		return nil, fmt.Errorf("plugin %q not found in any source%s", name, suggest.Hint(suggest.Closest(name, i.names)))
	}
	if constraint == "" {
		return vs[0], nil
	}
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return nil, fmt.Errorf("invalid version constraint %q: %w", constraint, err)
	}
	for _, v := range vs {
		if c.Check(v.Version) {
			return v, nil
		}
	}
	avail := make([]string, len(vs))
	for j, v := range vs {
		avail[j] = v.Version.String()
	}
	return nil, fmt.Errorf("no version of plugin %q matches %q (available: %s)", name, constraint, strings.Join(avail, ", "))
}

// Fetch implements [Catalog]: it fetches v through the source that listed it, once
// (a fetch cut short by ctx is tried again next time), and checks that the package is
// the one listed: the same name and version, the same fields the resolver read
// (kubernetesVersion, requires, conflicts, after, before) and, when the listing
// announced a digest, the same digest. A mismatch is a fatal diagnostic naming both.
func (i *Index) Fetch(ctx context.Context, v *Version) (*plugin.Package, diag.List) {
	i.mu.Lock()
	e, ok := i.fetched[v]
	if !ok {
		e = &fetchEntry{}
		i.fetched[v] = e
	}
	i.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return e.pkg, e.l
	}
	pkg, l := fetch(ctx, v)
	if ctx.Err() == nil {
		e.done, e.pkg, e.l = true, pkg, l
	}
	return pkg, l
}

func fetch(ctx context.Context, v *Version) (*plugin.Package, diag.List) {
	var l diag.List
	if v.source == nil {
		l.Errorf(v.Location, 0, 0, "", "cannot fetch plugin %s: no source listed it", v.ID())
		return nil, l
	}
	pkg, l := v.source.Fetch(ctx, v)
	if pkg == nil {
		if !l.HasFatal() {
			l.Errorf(v.Location, 0, 0, "", "cannot fetch plugin %s", v.ID())
		}
		return nil, l
	}
	if l.HasFatal() {
		return nil, l
	}
	file := path.Join(pkg.Location, plugin.ManifestFile)
	switch {
	case pkg.Name != v.Name || !pkg.Version.Equal(v.Version):
		l.Errorf(file, 0, 0, "", "the source listed plugin %s here, but the package fetched is %s", v.ID(), pkg.ID())
		return nil, l
	case v.Digest != "" && pkg.Digest != v.Digest:
		l.Errorf(file, 0, 0, "", "plugin %s has digest %s, but the source announced %s", v.ID(), pkg.Digest, v.Digest)
		return nil, l
	}
	if field, got, listed := disagree(v, versionOf(pkg.Manifest, v.Origin, v.Location)); field != "" {
		l.Errorf(file, 0, 0, field, "plugin %s has %s %s, but the source listed it with %s; the resolver chose it by the listing", v.ID(), field, got, listed)
		return nil, l
	}
	return pkg, l
}

// disagree returns the first field the resolver reads in which the listing listed and
// the package's own got differ, with both values; "" when they agree.
func disagree(listed, got *Version) (field, gotValue, listedValue string) {
	str := func(c *semver.Constraints) string {
		if c == nil {
			return "any"
		}
		return c.String()
	}
	reqs := func(rs []Requirement) []string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = r.Name + " " + str(r.Constraint)
		}
		return out
	}
	list := func(s []string) string { return "[" + strings.Join(s, ", ") + "]" }
	for _, f := range []struct {
		field    string
		got, was string
	}{
		{"spec.kubernetesVersion", str(got.KubernetesVersion), str(listed.KubernetesVersion)},
		{"spec.requires", list(reqs(got.Requires)), list(reqs(listed.Requires))},
		{"spec.conflicts", list(got.Conflicts), list(listed.Conflicts)},
		{"spec.after", list(got.After), list(listed.After)},
		{"spec.before", list(got.Before), list(listed.Before)},
		{"spec.providers", list(got.Providers), list(listed.Providers)},
	} {
		if f.got != f.was {
			return f.field, f.got, f.was
		}
	}
	return "", "", ""
}

// FetchAll fetches vs from c, at most parallelism at once (1 when less), and returns
// the packages in the order of vs, nil where a fetch failed, with the diagnostics in
// that order too, whatever order the fetches finished in.
func FetchAll(ctx context.Context, c Catalog, vs []*Version, parallelism int) ([]*plugin.Package, diag.List) {
	pkgs := make([]*plugin.Package, len(vs))
	ls := make([]diag.List, len(vs))
	sem := make(chan struct{}, max(parallelism, 1))
	var wg sync.WaitGroup
	for j, v := range vs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			pkgs[j], ls[j] = c.Fetch(ctx, v)
		})
	}
	wg.Wait()
	var l diag.List
	for _, fl := range ls {
		l = append(l, fl...)
	}
	return pkgs, l
}
