package source

import (
	"context"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/plugins"
)

// tree is a source that is a file tree holding packages: every directory with a
// plugin.yaml is one (kubeplug does not look inside a package for more).
type tree struct {
	origin plugin.Origin
	fsys   fs.FS
	// location names the root; native says it is a path on this machine, joined with
	// the OS separator, rather than a slash-separated name such as builtin:plugins.
	location string
	native   bool
}

// Builtin returns the plugins compiled into the binary, at [plugin.OriginBuiltin].
func Builtin() Source {
	return &tree{origin: plugin.OriginBuiltin, fsys: plugins.FS, location: "builtin:plugins"}
}

// Dir returns the directory dir as a source of the given origin. The directory must
// exist when it is listed.
func Dir(origin plugin.Origin, dir string) Source {
	return &tree{origin: origin, fsys: os.DirFS(dir), location: filepath.Clean(dir), native: true}
}

// FS returns a tree of packages in fsys as a source of the given origin; location
// names its root in diagnostics (packages below it are location/PATH).
func FS(origin plugin.Origin, fsys fs.FS, location string) Source {
	return &tree{origin: origin, fsys: fsys, location: location}
}

// String names the source in logs.
func (s *tree) String() string { return s.origin.Name + " " + s.location }

// maxDepth bounds how deep a listing looks for packages below a source's root.
const maxDepth = 4

// List implements [Source]: it walks the tree for plugin.yaml files and reads each
// one, in parallel, in the walk's (lexical) order.
func (s *tree) List(ctx context.Context) ([]*Version, diag.List) {
	dirs, l := s.packages(ctx)
	type entry struct {
		v *Version
		l diag.List
	}
	entries := make([]entry, len(dirs))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, p := range dirs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				return
			}
			sub, err := fs.Sub(s.fsys, p)
			if err != nil {
				entries[i].l.Errorf(s.join(p), 0, 0, "", "cannot read: %v", unwrap(err))
				return
			}
			loc := s.join(p)
			m, ml := plugin.ReadManifest(sub, loc)
			if m == nil {
				entries[i].l = ml
				return
			}
			// A manifest's warnings come again when the package is fetched.
			entries[i].v = versionOf(m.Plugin, s.origin, loc)
			entries[i].v.Ref = treeRef{path: p, manifest: m}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		l.Errorf(s.location, 0, 0, "", "cannot list: %v", err)
		return nil, l
	}
	var out []*Version
	for _, e := range entries {
		l = append(l, e.l...)
		if e.v != nil {
			out = append(out, e.v)
		}
	}
	return out, l
}

// packages walks the tree and returns the directories holding a plugin.yaml, in
// lexical order, skipping hidden directories and testdata.
func (s *tree) packages(ctx context.Context) ([]string, diag.List) {
	var l diag.List
	if _, err := fs.Stat(s.fsys, "."); err != nil {
		l.Errorf(s.location, 0, 0, "", "plugin directory cannot be read: %v", unwrap(err))
		return nil, l
	}
	var dirs []string
	err := fs.WalkDir(s.fsys, ".", func(p string, d fs.DirEntry, err error) error {
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
		if _, err := fs.Stat(s.fsys, path.Join(p, plugin.ManifestFile)); err != nil {
			if depth(p) >= maxDepth {
				return fs.SkipDir
			}
			return nil
		}
		dirs = append(dirs, p)
		return fs.SkipDir
	})
	if err != nil {
		l.Errorf(s.location, 0, 0, "", "cannot scan: %v", err)
	}
	return dirs, l
}

// Fetch implements [Source]: it loads the package directory the listing found.
func (s *tree) Fetch(ctx context.Context, v *Version) (*plugin.Package, diag.List) {
	var l diag.List
	ref, ok := v.Ref.(treeRef)
	if !ok {
		l.Errorf(v.Location, 0, 0, "", "plugin %s was not listed by the source %s", v.ID(), s.location)
		return nil, l
	}
	if err := ctx.Err(); err != nil {
		l.Errorf(v.Location, 0, 0, "", "cannot fetch plugin %s: %v", v.ID(), err)
		return nil, l
	}
	sub, err := fs.Sub(s.fsys, ref.path)
	if err != nil {
		l.Errorf(v.Location, 0, 0, "", "cannot read: %v", unwrap(err))
		return nil, l
	}
	return ref.manifest.Load(sub, s.origin)
}

// treeRef is how a tree finds a package it listed: its directory, and its manifest as
// read, so that fetching does not decode it again.
type treeRef struct {
	path     string
	manifest *plugin.Manifest
}

func (s *tree) join(p string) string {
	if p == "." {
		return s.location
	}
	if !s.native {
		return s.location + "/" + p
	}
	return filepath.Join(s.location, filepath.FromSlash(p))
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
