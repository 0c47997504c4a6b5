package source

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/plugins"
)

// Source is a tree of plugin packages.
type Source struct {
	// Origin of every package found here.
	Origin plugin.Origin
	// FS is the tree.
	FS fs.FS
	// Location names the tree's root in diagnostics and in Package.Location.
	Location string
}

// Builtin returns the plugins compiled into the binary.
func Builtin() Source {
	return Source{Origin: plugin.OriginBuiltin, FS: plugins.FS, Location: "builtin:plugins"}
}

// Dir returns a directory source. The directory must exist when it is scanned.
func Dir(origin plugin.Origin, dir string) Source {
	return Source{Origin: origin, FS: os.DirFS(dir), Location: filepath.Clean(dir)}
}

// maxDepth bounds how deep a scan looks for packages below a source's root.
const maxDepth = 4

// Scan finds and loads every package in the source.
func (s Source) Scan(ctx context.Context) ([]*plugin.Package, diag.List) {
	var l diag.List
	if _, err := fs.Stat(s.FS, "."); err != nil {
		l.Errorf(s.Location, 0, 0, "", "plugin directory cannot be read: %v", unwrap(err))
		return nil, l
	}
	var pkgs []*plugin.Package
	err := fs.WalkDir(s.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err != nil {
			l.Errorf(s.join(p), 0, 0, "", "cannot read: %v", unwrap(err))
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		if p != "." && (d.Name()[0] == '.' || d.Name() == "testdata") {
			return fs.SkipDir
		}
		if _, err := fs.Stat(s.FS, path.Join(p, plugin.ManifestFile)); err != nil {
			if depth(p) >= maxDepth {
				return fs.SkipDir
			}
			return nil
		}
		sub, err := fs.Sub(s.FS, p)
		if err != nil {
			return err
		}
		pkg, pl := plugin.Load(sub, s.Origin, s.join(p))
		l = append(l, pl...)
		if pkg != nil {
			pkgs = append(pkgs, pkg)
		}
		return fs.SkipDir
	})
	if err != nil {
		l.Errorf(s.Location, 0, 0, "", "cannot scan: %v", err)
	}
	return pkgs, l
}

func (s Source) join(p string) string {
	if p == "." {
		return s.Location
	}
	if s.Origin == plugin.OriginBuiltin {
		return s.Location + "/" + p
	}
	return filepath.Join(s.Location, filepath.FromSlash(p))
}

func depth(p string) int {
	if p == "." {
		return 0
	}
	n := 1
	for _, c := range p {
		if c == '/' {
			n++
		}
	}
	return n
}

func unwrap(err error) error {
	if pe, ok := err.(*fs.PathError); ok { //nolint:errorlint // fs errors are not wrapped
		return pe.Err
	}
	return err
}

// Index holds every visible package by name, newest version first.
type Index struct {
	byName map[string][]*plugin.Package
	names  []string
	// Shadowed lists packages hidden by a higher-precedence origin.
	Shadowed []*plugin.Package
}

// Load scans the sources and indexes what they hold. Diagnostics include every
// package's problems, duplicates (fatal) and shadowing (warnings). The index holds
// every package that loaded, even when some did not.
func Load(ctx context.Context, sources ...Source) (*Index, diag.List) {
	var all []*plugin.Package
	var l diag.List
	for _, s := range sources {
		pkgs, sl := s.Scan(ctx)
		all = append(all, pkgs...)
		l = append(l, sl...)
	}
	idx, il := NewIndex(all)
	return idx, append(l, il...)
}

// NewIndex indexes packages, applying the shadowing and duplicate rules.
func NewIndex(pkgs []*plugin.Package) (*Index, diag.List) {
	var l diag.List
	top := map[string]int{} // highest origin rank per name
	for _, p := range pkgs {
		if r, ok := top[p.Name]; !ok || p.Origin.Rank() > r {
			top[p.Name] = p.Origin.Rank()
		}
	}
	idx := &Index{byName: map[string][]*plugin.Package{}}
	seen := map[string]*plugin.Package{}
	shadower := map[string]*plugin.Package{}
	for _, p := range pkgs {
		if p.Origin.Rank() < top[p.Name] {
			idx.Shadowed = append(idx.Shadowed, p)
			continue
		}
		if prev, dup := seen[p.ID()]; dup {
			l.Errorf(path.Join(p.Location, plugin.ManifestFile), 0, 0, "", "plugin %s is also at %s; each name and version may appear once per origin (%s)", p.ID(), prev.Location, p.Origin)
			continue
		}
		seen[p.ID()] = p
		shadower[p.Name] = p
		idx.byName[p.Name] = append(idx.byName[p.Name], p)
	}
	for _, s := range idx.Shadowed {
		w := shadower[s.Name]
		l.Warnf(path.Join(w.Location, plugin.ManifestFile), 0, 0, "", "%s plugin %s shadows the %s plugin %s at %s", w.Origin, w.Name, s.Origin, s.ID(), s.Location)
	}
	for name, vs := range idx.byName {
		slices.SortFunc(vs, func(a, b *plugin.Package) int { return b.Version.Compare(a.Version) })
		idx.names = append(idx.names, name)
	}
	slices.Sort(idx.names)
	slices.SortFunc(idx.Shadowed, func(a, b *plugin.Package) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), b.Version.Compare(a.Version))
	})
	return idx, l
}

// Names returns the plugin names, sorted.
func (i *Index) Names() []string { return i.names }

// Versions returns every version of name, newest first; nil when unknown.
func (i *Index) Versions(name string) []*plugin.Package { return i.byName[name] }

// All returns every visible package, by name then newest version first.
func (i *Index) All() []*plugin.Package {
	var out []*plugin.Package
	for _, n := range i.names {
		out = append(out, i.byName[n]...)
	}
	return out
}

// Find returns the newest version of name matching the constraint (empty: any).
func (i *Index) Find(name, constraint string) (*plugin.Package, error) {
	vs := i.byName[name]
	if len(vs) == 0 {
		return nil, fmt.Errorf("plugin %q not found in any source", name)
	}
	if constraint == "" {
		return vs[0], nil
	}
	c, err := parseConstraint(constraint)
	if err != nil {
		return nil, err
	}
	for _, p := range vs {
		if c.Check(p.Version) {
			return p, nil
		}
	}
	avail := make([]string, len(vs))
	for j, p := range vs {
		avail[j] = p.Version.String()
	}
	return nil, fmt.Errorf("no version of plugin %q matches %q (available: %s)", name, constraint, joinComma(avail))
}
