package source

import (
	"context"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// Source is a catalog of plugin packages: it lists versions as metadata, and fetches a
// package once it is wanted.
//
// A Source is safe for concurrent use: an [Index] fetches several packages at once.
type Source interface {
	// List returns every version the source holds, as metadata only: a source does
	// not read a package's templates, schemas, charts or other files to list it.
	// Every Version has Name, Version, Origin and Location set; Digest when the
	// source knows it without fetching. Diagnostics locate broken entries (FILE:LINE
	// and field), which are left out of the list; a source that cannot be read at all
	// returns a fatal diagnostic naming it and no versions. When ctx is cancelled List
	// stops and reports ctx's error as a fatal diagnostic.
	List(ctx context.Context) ([]*Version, diag.List)

	// Fetch returns the package of a version this source listed, loaded and checked
	// whole ([plugin.Load]): nil with fatal diagnostics when it is broken or cannot be
	// reached. Call it through [Index.Fetch], which checks that the package is the
	// one listed. A source that downloads archives unpacks them here, before
	// anything is loaded, refusing what would land outside the package (entries
	// with ".." or absolute paths, links out of it, device files) and archives past
	// the size limits of [plugin.MaxPackageSize]; [plugin.Load] then checks the tree
	// again (symlinks, file sizes) and computes the digest that Index.Fetch compares.
	Fetch(ctx context.Context, v *Version) (*plugin.Package, diag.List)
}

// Version is one version of one plugin as a source lists it: what the resolver needs
// to pick it, and where it comes from. A Version is read-only once listed.
type Version struct {
	// Name and Version identify the package.
	Name    string
	Version *semver.Version
	// Description is metadata.description.
	Description string
	// KubernetesVersion is spec.kubernetesVersion, nil when any version will do.
	KubernetesVersion *semver.Constraints
	// Providers is spec.providers, nil when every provider will do.
	Providers []string
	// Requires, Conflicts, After and Before are the package's spec fields of those
	// names, as the resolver reads them.
	Requires                 []Requirement
	Conflicts, After, Before []string
	// Digest is the package digest ([plugin.Package.Digest]) the source announces,
	// empty when the source cannot know it without reading the whole package (a
	// directory: its files are the truth). Fetching checks it.
	Digest string
	// Origin is the source's origin: its name and precedence rank.
	Origin plugin.Origin
	// Location names the package in diagnostics: a directory, builtin:plugins/NAME,
	// or a source's own notation.
	Location string
	// Ref is the source's own handle for fetching the version (a path, a URL);
	// nobody else reads it.
	Ref any

	// source is the source that listed the version, set by the Index.
	source Source
}

// Requirement is one entry of spec.requires.
type Requirement struct {
	Name string
	// Constraint limits the acceptable versions; nil means any.
	Constraint *semver.Constraints
}

// ID returns name@version.
func (v *Version) ID() string { return v.Name + "@" + v.Version.String() }

// Catalog lists plugin versions and fetches the ones a plan picks: what the engine
// plans against. [*Index] is the Catalog of a set of sources.
type Catalog interface {
	// Versions returns every version of the named plugin, newest first, or nil when
	// none is known. It returns the same *Version for the same version every time.
	Versions(name string) []*Version
	// Fetch returns the package of a version Versions returned, loaded whole and
	// checked against the listing; nil with fatal diagnostics when that fails. A
	// Catalog may fetch each version once and return the same package afterwards.
	Fetch(ctx context.Context, v *Version) (*plugin.Package, diag.List)
}

var (
	_ Catalog = (*Index)(nil)
	_ Source  = (*tree)(nil)
	_ Source  = loaded(nil)
)

// versionOf returns the listing of a package from its manifest. The manifest has
// passed [plugin.DecodeManifest], so its versions and constraints parse.
func versionOf(m *v1alpha1.Plugin, origin plugin.Origin, location string) *Version {
	s := m.Spec
	v := &Version{
		Name: m.Metadata.Name, Description: m.Metadata.Description,
		Conflicts: s.Conflicts, After: s.After, Before: s.Before, Providers: s.Providers,
		Origin: origin, Location: location,
	}
	v.Version, _ = semver.StrictNewVersion(m.Metadata.Version)
	if s.KubernetesVersion != "" {
		v.KubernetesVersion, _ = semver.NewConstraint(s.KubernetesVersion)
	}
	for _, r := range s.Requires {
		req := Requirement{Name: r.Name}
		if r.Version != "" {
			req.Constraint, _ = semver.NewConstraint(r.Version)
		}
		v.Requires = append(v.Requires, req)
	}
	return v
}
