package archive

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"testing/fstest"
	"time"

	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// Ext is the file name extension of a package archive.
const Ext = ".tgz"

// Limits bound what [Extract] accepts. A zero field takes its default.
type Limits struct {
	// MaxFileSize bounds one file; default [plugin.MaxFileSize].
	MaxFileSize int64
	// MaxSize bounds the sum of the files; default [plugin.MaxPackageSize].
	MaxSize int64
	// MaxEntries bounds the number of entries (files, directories, links); default
	// [DefaultMaxEntries].
	MaxEntries int
}

// DefaultMaxEntries is the default bound on the entries of an archive.
const DefaultMaxEntries = 10000

// headerAllowance bounds the decompressed bytes an entry may take beyond its content
// (tar headers, extended headers, padding).
const headerAllowance = 8 << 10

func (l Limits) withDefaults() Limits {
	if l.MaxFileSize <= 0 {
		l.MaxFileSize = plugin.MaxFileSize
	}
	if l.MaxSize <= 0 {
		l.MaxSize = plugin.MaxPackageSize
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	return l
}

// epoch is the time every entry carries, so that archives do not depend on when or
// where they were made.
var epoch = time.Unix(0, 0).UTC()

// Write writes the tree fsys as a deterministic gzipped tar archive to w. It holds
// directories, regular files and symlinks (as links); any other file type is an
// error naming it. Directories named .git are left out, as the package digest leaves
// them out. Write does not check the package: load it with [plugin.Load] first.
func Write(w io.Writer, fsys fs.FS) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return fmt.Errorf("create gzip writer: %w", err)
	}
	tw := tar.NewWriter(zw)
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		h := &tar.Header{Name: p, ModTime: epoch, Format: tar.FormatPAX}
		switch t := d.Type(); {
		case d.IsDir():
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, p+"/", 0o755
		case t&fs.ModeSymlink != 0:
			target, err := fs.ReadLink(fsys, p)
			if err != nil {
				return fmt.Errorf("read symlink %s: %w", p, err)
			}
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, target, 0o777
		case t.IsRegular():
			fi, err := d.Info()
			if err != nil {
				return fmt.Errorf("stat %s: %w", p, err)
			}
			h.Typeflag, h.Size, h.Mode = tar.TypeReg, fi.Size(), 0o644
			if fi.Mode().Perm()&0o111 != 0 {
				h.Mode = 0o755
			}
		default:
			return fmt.Errorf("archive %s: unsupported file type %s", p, t)
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("archive %s: %w", p, err)
		}
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := fsys.Open(p)
		if err != nil {
			return fmt.Errorf("open %s: %w", p, err)
		}
		defer func() { _ = f.Close() }()
		n, err := io.Copy(tw, io.LimitReader(f, h.Size))
		if err == nil && n != h.Size {
			err = fmt.Errorf("file changed size while archived (%d bytes, expected %d)", n, h.Size)
		}
		if err != nil {
			return fmt.Errorf("archive %s: %w", p, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finish tar stream: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("finish gzip stream: %w", err)
	}
	return nil
}

// ErrLimit is wrapped by the errors of [Extract] for archives past its [Limits].
var ErrLimit = errors.New("archive exceeds a limit")

// countingReader fails once more than limit bytes were read through it.
type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.n > c.limit {
		return 0, fmt.Errorf("%w: more than %d bytes decompressed", ErrLimit, c.limit)
	}
	if rest := c.limit - c.n + 1; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.limit {
		return n, fmt.Errorf("%w: more than %d bytes decompressed", ErrLimit, c.limit)
	}
	return n, err
}

// Extract unpacks the gzipped tar archive r into memory and returns its tree, after
// the checks the package documentation lists. Errors name the offending entry.
//
// Branches: the checks the package documentation lists, in the order an entry
// meets them while the archive streams; the running totals the limits need stay
// in one place.
func Extract(r io.Reader, lim Limits) (fs.FS, error) {
	lim = lim.withDefaults()
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("not a gzipped archive: %w", err)
	}
	defer func() { _ = zr.Close() }()
	cr := &countingReader{r: zr, limit: lim.MaxSize + int64(lim.MaxEntries+2)*headerAllowance}
	tr := tar.NewReader(cr)
	out := fstest.MapFS{}
	var total int64
	entries := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read archive: %w", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if entries++; entries > lim.MaxEntries {
			return nil, fmt.Errorf("%w: more than %d entries", ErrLimit, lim.MaxEntries)
		}
		name, err := cleanName(h.Name)
		if err != nil {
			return nil, err
		}
		if name == "." {
			continue // the root itself
		}
		if _, dup := out[name]; dup {
			if h.Typeflag != tar.TypeDir || !out[name].Mode.IsDir() {
				return nil, fmt.Errorf("entry %q appears twice in the archive", h.Name)
			}
			continue
		}
		if err := parents(out, name); err != nil {
			return nil, err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			out[name] = &fstest.MapFile{Mode: fs.ModeDir | 0o755, ModTime: epoch}
		case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // TypeRegA is how old tars mark files
			if h.Size > lim.MaxFileSize {
				return nil, fmt.Errorf("%w: entry %q is %d bytes, past the %d-byte limit for a file", ErrLimit, h.Name, h.Size, lim.MaxFileSize)
			}
			if total += h.Size; total > lim.MaxSize {
				return nil, fmt.Errorf("%w: the files hold more than %d bytes", ErrLimit, lim.MaxSize)
			}
			data := make([]byte, h.Size)
			if _, err := io.ReadFull(tr, data); err != nil {
				return nil, fmt.Errorf("read entry %q: %w", h.Name, err)
			}
			mode := fs.FileMode(0o644)
			if h.Mode&0o111 != 0 {
				mode = 0o755
			}
			out[name] = &fstest.MapFile{Data: data, Mode: mode, ModTime: epoch}
		case tar.TypeSymlink:
			if err := checkLink(name, h.Linkname); err != nil {
				return nil, err
			}
			out[name] = &fstest.MapFile{Data: []byte(h.Linkname), Mode: fs.ModeSymlink | 0o777, ModTime: epoch}
		case tar.TypeLink:
			return nil, fmt.Errorf("entry %q is a hard link; packages hold regular files, directories and symlinks", h.Name)
		case tar.TypeChar, tar.TypeBlock:
			return nil, fmt.Errorf("entry %q is a device file; packages hold regular files, directories and symlinks", h.Name)
		case tar.TypeFifo:
			return nil, fmt.Errorf("entry %q is a FIFO; packages hold regular files, directories and symlinks", h.Name)
		default:
			return nil, fmt.Errorf("entry %q has unsupported type %q; packages hold regular files, directories and symlinks", h.Name, h.Typeflag)
		}
	}
	return out, nil
}

// cleanName returns the slash path of an entry inside the package, refusing names
// that are absolute, climb with "..", or are not in clean form.
func cleanName(name string) (string, error) {
	n := strings.TrimPrefix(name, "./")
	n = strings.TrimSuffix(n, "/")
	switch {
	case n == "" || n == ".":
		return ".", nil
	case strings.HasPrefix(n, "/") || strings.Contains(n, "\\") || (len(n) > 1 && n[1] == ':'):
		return "", fmt.Errorf("entry %q has an absolute path; entries must stay inside the package", name)
	case n == ".." || strings.HasPrefix(n, "../") || strings.Contains(n, "/../") || strings.HasSuffix(n, "/.."):
		return "", fmt.Errorf("entry %q climbs out with \"..\"; entries must stay inside the package", name)
	case path.Clean(n) != n || !fs.ValidPath(n):
		return "", fmt.Errorf("entry %q is not a clean relative path", name)
	}
	return n, nil
}

// parents adds the missing parent directories of name to out and refuses a name
// below a symlink or a file.
func parents(out fstest.MapFS, name string) error {
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		f, ok := out[d]
		switch {
		case !ok:
			out[d] = &fstest.MapFile{Mode: fs.ModeDir | 0o755, ModTime: epoch}
		case f.Mode&fs.ModeSymlink != 0:
			return fmt.Errorf("entry %q lies below the symlink %q; entries must not go through links", name, d)
		case !f.Mode.IsDir():
			return fmt.Errorf("entry %q lies below the file %q", name, d)
		}
	}
	return nil
}

// checkLink refuses a symlink whose target is absolute or leads above the package
// root from where the link is.
func checkLink(name, target string) error {
	if target == "" || path.IsAbs(target) || strings.Contains(target, "\\") {
		return fmt.Errorf("entry %q is a symlink to %q, outside the package; packages must be self-contained", name, target)
	}
	resolved := path.Join(path.Dir(name), target)
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return fmt.Errorf("entry %q is a symlink to %q, outside the package; packages must be self-contained", name, target)
	}
	return nil
}
