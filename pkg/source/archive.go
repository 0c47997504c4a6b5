package source

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// archiveFile is a source that is one package archive on this machine.
type archiveFile struct {
	origin plugin.Origin
	file   string
}

// Archive returns the package archive file (written by `kubeplug plugin package`, see
// package archive) as a source of one package of the given origin. Listing unpacks it
// into memory with every check of [archive.Extract] and reads its manifest; the
// package is checked whole when fetched.
func Archive(origin plugin.Origin, file string) Source {
	return &archiveFile{origin: origin, file: filepath.Clean(file)}
}

// Path returns the source for a path given by a user: a file of KKP
// ApplicationDefinitions ([KKPDefinitions]) when it is a .yaml or .yml file, an
// archive when it is another file, a directory of packages ([Dir]) otherwise.
func Path(origin plugin.Origin, p string) Source {
	if IsArchive(p) && IsKKPFile(p) {
		return KKPDefinitions(origin, p)
	}
	if IsArchive(p) {
		return Archive(origin, p)
	}
	return Dir(origin, p)
}

// IsArchive reports whether p names a file (a package archive, whatever its
// name) rather than a directory. A FIFO or a device counts as a file here, so
// that reading it is refused as an archive that is not a regular file rather
// than reported as a missing directory.
func IsArchive(p string) bool {
	fi, err := os.Stat(p)
	if err != nil {
		return strings.HasSuffix(p, archive.Ext) || strings.HasSuffix(p, ".tar.gz")
	}
	return !fi.IsDir()
}

// String names the source in logs.
func (s *archiveFile) String() string { return s.origin.Name + " " + s.file }

// List implements [Source].
func (s *archiveFile) List(ctx context.Context) ([]*Version, diag.List) {
	var l diag.List
	if err := ctx.Err(); err != nil {
		l.Errorf(s.file, 0, 0, "", "cannot list: %v", err)
		return nil, l
	}
	fsys, err := openArchive(s.file)
	if err != nil {
		l.Errorf(s.file, 0, 0, "", "%v", err)
		return nil, l
	}
	m, ml := plugin.ReadManifest(fsys, s.file)
	if m == nil {
		return nil, ml
	}
	v := versionOf(m.Plugin, s.origin, s.file)
	v.Ref = archiveRef{fsys: fsys, manifest: m}
	return []*Version{v}, nil
}

// Fetch implements [Source].
func (s *archiveFile) Fetch(ctx context.Context, v *Version) (*plugin.Package, diag.List) {
	var l diag.List
	ref, ok := v.Ref.(archiveRef)
	if !ok {
		l.Errorf(v.Location, 0, 0, "", "plugin %s was not listed by the source %s", v.ID(), s.file)
		return nil, l
	}
	if err := ctx.Err(); err != nil {
		l.Errorf(v.Location, 0, 0, "", "cannot fetch plugin %s: %v", v.ID(), err)
		return nil, l
	}
	return ref.manifest.Load(ref.fsys, s.origin)
}

// archiveRef is an unpacked archive and its manifest as read.
type archiveRef struct {
	fsys     fs.FS
	manifest *plugin.Manifest
}

// openArchive unpacks the archive file into memory.
func openArchive(file string) (fs.FS, error) {
	f, fi, err := bounded.OpenFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read the plugin archive: %w", err)
	}
	defer func() { _ = f.Close() }()
	if fi.Size() > plugin.MaxPackageSize {
		return nil, fmt.Errorf("cannot read the plugin archive: %w", &bounded.TooLargeError{Size: fi.Size(), Limit: plugin.MaxPackageSize})
	}
	fsys, err := archive.Extract(io.LimitReader(f, plugin.MaxPackageSize+1), archive.Limits{})
	if err != nil {
		return nil, fmt.Errorf("cannot unpack the plugin archive: %w", err)
	}
	return fsys, nil
}
