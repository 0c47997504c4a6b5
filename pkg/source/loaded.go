package source

import (
	"context"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// loaded is a source of packages a program loaded itself.
type loaded []*plugin.Package

// Loaded returns a source holding packages already loaded with [plugin.Load]: a
// library user's own packages, or a test's. Each keeps its own origin; the listing
// announces each package's digest, and fetching returns the package itself.
func Loaded(pkgs ...*plugin.Package) Source { return loaded(pkgs) }

// List implements [Source].
func (s loaded) List(ctx context.Context) ([]*Version, diag.List) {
	out := make([]*Version, 0, len(s))
	for i, p := range s {
		v := versionOf(p.Manifest, p.Origin, p.Location)
		v.Digest, v.Ref = p.Digest, i
		out = append(out, v)
	}
	return out, nil
}

// Fetch implements [Source].
func (s loaded) Fetch(ctx context.Context, v *Version) (*plugin.Package, diag.List) {
	if i, ok := v.Ref.(int); ok && i >= 0 && i < len(s) {
		return s[i], nil
	}
	var l diag.List
	l.Errorf(v.Location, 0, 0, "", "plugin %s was not listed by this source", v.ID())
	return nil, l
}
