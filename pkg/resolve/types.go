package resolve

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/Masterminds/semver/v3"
)

// Package is one version of one plugin, as a source holds it.
//
// The resolver treats a Package as read-only and compares packages by
// pointer: a [Catalog] must return the same *Package every time it is asked
// about the same version.
type Package struct {
	// Name and Version identify the package; both are required.
	Name    string
	Version *semver.Version

	// Requires are hard dependencies: each must be installed, at a version
	// satisfying its constraint, and ordered before this package.
	Requires []Requirement

	// Conflicts names plugins that must not be part of the same resolution,
	// whatever their version.
	Conflicts []string

	// After and Before are soft ordering hints: this package is installed
	// after (before) each named plugin, but only if that plugin is part of
	// the result. They never pull a plugin in.
	After, Before []string

	// KubernetesVersion is the range of cluster Kubernetes versions this
	// package supports; nil means any.
	KubernetesVersion *semver.Constraints

	// Providers are the providers this package runs on; nil means any.
	Providers []string

	// Source is an opaque handle for the caller, for example the loaded
	// plugin. The resolver never reads it.
	Source any
}

// String returns "name version", the form used in error messages.
func (p *Package) String() string { return p.Name + " " + p.Version.String() }

// Requirement asks for some version of a named plugin.
type Requirement struct {
	Name string
	// Constraint limits the acceptable versions; nil means any.
	Constraint *semver.Constraints
}

// Catalog holds every version of every plugin the sources provide.
type Catalog interface {
	// Versions returns every version of the named plugin, highest first, or
	// nothing if no source provides it. The resolver does not modify the
	// returned slice and may keep it for the duration of one Resolve call.
	Versions(name string) []*Package
}

// NameLister is a [Catalog] that can list the names it holds. It is optional:
// the resolver uses it only to suggest the names closest to a missing one in a
// [MissingError].
type NameLister interface {
	// Names returns every plugin name the catalog holds, in any order.
	Names() []string
}

// CatalogFunc adapts a function to a [Catalog].
type CatalogFunc func(name string) []*Package

// Versions calls f(name).
func (f CatalogFunc) Versions(name string) []*Package { return f(name) }

var (
	_ Catalog    = CatalogFunc(nil)
	_ Catalog    = (*MapCatalog)(nil)
	_ NameLister = (*MapCatalog)(nil)
)

// MapCatalog is an in-memory [Catalog]. Build it with [NewCatalog]; it is
// safe for concurrent use once built.
type MapCatalog struct {
	byName map[string][]*Package
}

// NewCatalog returns a catalog of pkgs, each name's versions sorted highest
// first once, here. If several packages have the same name and version, the
// first one given wins, so callers list their sources in precedence order.
// It panics on a package without a name or version: the loader must have
// rejected it already.
func NewCatalog(pkgs ...*Package) *MapCatalog {
	c := &MapCatalog{byName: make(map[string][]*Package)}
	for _, p := range pkgs {
		if p == nil || p.Name == "" || p.Version == nil {
			panic(fmt.Sprintf("resolve: NewCatalog: package without name or version: %#v", p))
		}
		c.byName[p.Name] = append(c.byName[p.Name], p)
	}
	for name, vs := range c.byName {
		// Stable, so that the first of two equal versions stays first and
		// wins the deduplication below.
		sort.SliceStable(vs, func(i, j int) bool { return vs[i].Version.GreaterThan(vs[j].Version) })
		out := vs[:1]
		for _, p := range vs[1:] {
			if !p.Version.Equal(out[len(out)-1].Version) {
				out = append(out, p)
			}
		}
		c.byName[name] = out
	}
	return c
}

// Versions implements [Catalog].
func (c *MapCatalog) Versions(name string) []*Package { return c.byName[name] }

// Names implements [NameLister]: the names, sorted.
func (c *MapCatalog) Names() []string { return slices.Sorted(maps.Keys(c.byName)) }

// Request is what the cluster asks for.
type Request struct {
	// Enabled lists the plugins the cluster enables, each with an optional
	// version constraint. A name may appear more than once; every constraint
	// applies.
	Enabled []Requirement

	// KubernetesVersion is the cluster's Kubernetes version, checked against
	// each package's KubernetesVersion constraint; nil skips the check.
	// Semver rules apply: build metadata (+k3s1) is ignored, and a
	// pre-release (1.34.0-rc.1) only satisfies constraints that name a
	// pre-release, so pass the release version if that is not wanted.
	KubernetesVersion *semver.Version

	// Provider is the cluster's provider, checked against each package's
	// Providers; empty skips the check.
	Provider string

	// Prefer names, per plugin, the version to pick when it can be picked —
	// it satisfies every constraint and leads to a solution — even if a
	// higher one could: the version a lock file pins, so that a newly
	// published version is not taken until the lock is updated. A preferred
	// version the catalog does not hold, or that cannot be picked, is
	// ignored: the name then gets the highest version that can.
	Prefer map[string]*semver.Version

	// Order optionally fixes the installation order: the named plugins come
	// first, in this order, and every other plugin after all of them, by its
	// dependencies. Names that are not part of the result are ignored, so one
	// order list can serve clusters that enable different plugins.
	Order []string
}

// Result is a successful resolution.
type Result struct {
	// Plugins holds the selected packages in installation order: Waves
	// flattened.
	Plugins []*Package

	// Waves groups Plugins into layers: every dependency and ordering
	// predecessor of a package is in an earlier wave, so the packages of one
	// wave can be installed in parallel. Within a wave, packages are sorted
	// by name.
	Waves [][]*Package

	// After names, for every plugin of the result, the plugins it waits
	// for, sorted: those it requires, those its after and before hints and
	// theirs order it behind, its predecessor in the order list, and, for a
	// plugin the order list does not name, every plugin it does. Waves are
	// these edges laid out in layers; a caller that starts each plugin as soon
	// as the plugins After names are done keeps every ordering guarantee the
	// waves give, without waiting for the rest of a wave. A plugin that waits
	// for nothing has no entry.
	After map[string][]string
}
