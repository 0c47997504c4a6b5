package plugin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

type fileInfo struct {
	dir  bool
	size int64
	// escapes marks a symlink refused because it points outside the package; it
	// is kept so references to it say so rather than "does not exist".
	escapes bool
}

// walk visits every file of the package in lexical order, checks the limits and the
// symlinks, and computes the digest. It returns the set of paths (files and
// directories) for reference checks.
//
// The digest covers, per entry, its slash path, its type (file or symlink), and its
// content or link target, length-prefixed so no two packages share a stream.
// Directories contribute through their files only; modes and times are left out so
// the digest is the same from a directory, an archive or an embed.FS.
func walk(fsys fs.FS, location string) (map[string]fileInfo, string, diag.List) {
	var l diag.List
	files := map[string]fileInfo{".": {dir: true}}
	h := sha256.New()
	var total int64
	field := func(s string) {
		_, _ = io.WriteString(h, strconv.Itoa(len(s))+":"+s)
	}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			l.Errorf(path.Join(location, p), 0, 0, "", "cannot read: %v", unwrapPath(err))
			return nil
		}
		if p == "." {
			return nil
		}
		name := path.Join(location, p)
		switch t := d.Type(); {
		case d.IsDir():
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			files[p] = fileInfo{dir: true}
		case t&fs.ModeSymlink != 0:
			target, err := fs.ReadLink(fsys, p)
			if err != nil {
				l.Errorf(name, 0, 0, "", "cannot read symlink: %v", unwrapPath(err))
				return nil
			}
			if msg := linkEscape(fsys, p, target); msg != "" {
				l.Errorf(name, 0, 0, "", "%s", msg)
				files[p] = fileInfo{escapes: true}
				return nil
			}
			fi, err := fs.Stat(fsys, p)
			if err != nil {
				l.Errorf(name, 0, 0, "", "broken symlink to %q", target)
				return nil
			}
			if !fi.IsDir() && !fi.Mode().IsRegular() {
				l.Errorf(name, 0, 0, "", "symlink to %q, which is a %s; packages hold regular files, directories and symlinks", target, bounded.Kind(fi.Mode()))
				files[p] = fileInfo{escapes: true}
				return nil
			}
			files[p] = fileInfo{dir: fi.IsDir(), size: fi.Size()}
			field("L")
			field(p)
			field(target)
		case t.IsRegular():
			fi, err := d.Info()
			if err != nil {
				l.Errorf(name, 0, 0, "", "cannot stat: %v", unwrapPath(err))
				return nil
			}
			if fi.Size() > MaxFileSize {
				l.Errorf(name, 0, 0, "", "file is %s, larger than the %s limit for a file in a package", size(fi.Size()), size(MaxFileSize))
				return nil
			}
			total += fi.Size()
			if total > MaxPackageSize {
				l.Errorf(name, 0, 0, "", "package is larger than the %s limit", size(MaxPackageSize))
				return fs.SkipAll
			}
			files[p] = fileInfo{size: fi.Size()}
			data, err := readLimited(fsys, p, MaxFileSize)
			if err != nil {
				l.Errorf(name, 0, 0, "", "cannot read: %v", unwrapPath(err))
				return nil
			}
			field("F")
			field(p)
			field(string(data))
		default:
			l.Errorf(name, 0, 0, "", "unsupported file type %s; packages hold regular files, directories and symlinks", t)
		}
		return nil
	})
	if err != nil {
		l.Errorf(location, 0, 0, "", "cannot walk the package: %v", err)
	}
	return files, "sha256:" + hex.EncodeToString(h.Sum(nil)), l
}

// linkEscape says why the symlink p, which points to target, leads out of fsys; ""
// when it does not.
func linkEscape(fsys fs.FS, p, target string) string {
	if !escapes(fsys, p) {
		return ""
	}
	if resolved := path.Join(path.Dir(p), target); !path.IsAbs(target) && resolved != ".." && !strings.HasPrefix(resolved, "../") {
		return fmt.Sprintf("symlink to %q leads outside the package through further links; packages must be self-contained", target)
	}
	return fmt.Sprintf("symlink points outside the package (to %q); packages must be self-contained", target)
}

// escapes reports whether following the symlinks in p, component by component,
// ever leaves fsys: through an absolute target, a ".." above the root, or a chain
// of links each of which looks harmless on its own (a -> b, b -> ../..).
func escapes(fsys fs.FS, p string) bool {
	var done []string
	todo := strings.Split(p, "/")
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return true
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(done, c)...)
		fi, err := fs.Lstat(fsys, cur)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		if hops++; hops > 40 {
			return true // a loop, or a chain too long to trust
		}
		target, err := fs.ReadLink(fsys, cur)
		if err != nil || path.IsAbs(target) {
			return true
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return false
}

// Digest computes a package's digest without checking its manifest.
func Digest(fsys fs.FS) (string, error) {
	_, d, l := walk(fsys, ".")
	if err := l.Err(); err != nil {
		return "", err
	}
	return d, nil
}

// readLimited reads a file of the package, refusing one larger than limit before
// reading it, and reading at most limit+1 bytes whatever its size claims. Only a
// regular file (or a symlink to one) is opened: opening a FIFO blocks until a
// writer comes, and a device never ends.
func readLimited(fsys fs.FS, name string, limit int64) ([]byte, error) {
	if fi, err := fs.Stat(fsys, name); err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		return nil, fmt.Errorf("cannot read: %s is a %s, not a regular file", path.Base(name), bounded.Kind(fi.Mode()))
	}
	f, err := fsys.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s not found: a plugin package has %s at its root", name, ManifestFile)
		}
		return nil, fmt.Errorf("cannot read: %w", unwrapPath(err))
	}
	defer func() { _ = f.Close() }()
	if fi, err := f.Stat(); err == nil && fi.Size() > limit {
		return nil, fmt.Errorf("file is %s, larger than the %s limit for %s", size(fi.Size()), size(limit), path.Base(name))
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read: %w", unwrapPath(err))
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("file is larger than the %s limit for %s", size(limit), path.Base(name))
	}
	return data, nil
}

func unwrapPath(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}
