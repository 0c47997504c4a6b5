package proc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Pinned is a package's executable verified once and kept as a private copy that
// every later run uses, for a runtime that runs one executable many times (the
// exec runtime starts it once per stage call): reading, hashing and copying a
// plugin of tens of megabytes is paid once, not per call.
//
// The first Path reads the package's file once, checks its sha256 and writes
// exactly the bytes it hashed to a new directory of its own (0700) under the
// temporary directory, as a file of mode 0500. Later calls hand out that copy
// without reading or hashing anything, after comparing its identity — device and
// inode, size, mode, modification time and, on Linux, change time — with what was
// recorded when it was written. When anything differs, or the copy is gone, the
// package's file is read and verified again and a fresh copy written. A process
// cannot set a file's change time, so a rewrite of the copy is noticed even when
// it keeps the size and modification time.
//
// A change to the package's file after the first Path does not reach the copy: the
// bytes verified first are what runs for the Pinned's life. The directory keeps
// other users out; processes of the host's own user are not a boundary it
// defends (as before, one could swap a copy between its check and its run).
//
// A Pinned is safe for concurrent use. Close removes the copy.
type Pinned struct {
	fsys     fs.FS
	name     string
	expected string

	mu   sync.Mutex
	dir  string      // the private directory, "" when there is no copy
	file string      // the copy in dir
	info fs.FileInfo // the copy as written
}

// NewPinned returns the executable at name in fsys, pinned to the sha256 expected
// (hex). Nothing is read until the first Path.
func NewPinned(fsys fs.FS, name, expected string) *Pinned {
	return &Pinned{fsys: fsys, name: name, expected: expected}
}

// Path returns the private copy's path, making it at the first call, or when the
// copy changed or vanished since it was written; renewed reports the latter. The
// error is a *DigestError when the package's file is not the pinned one, and
// otherwise says what could not be read or written; no copy is left then.
func (p *Pinned) Path() (file string, renewed bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dir != "" {
		if now, err := os.Lstat(p.file); err == nil && sameCopy(p.info, now) {
			return p.file, false, nil
		}
		// Changed or gone: run nothing of it.
		_ = os.RemoveAll(p.dir)
		p.dir, p.file, p.info, renewed = "", "", nil, true
	}
	dir, file, err := pin(p.fsys, p.name, p.expected)
	if err != nil {
		return "", renewed, err
	}
	info, err := os.Lstat(file)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", renewed, fmt.Errorf("copy executable %s: %w", p.name, err)
	}
	p.dir, p.file, p.info = dir, file, info
	return file, renewed, nil
}

// Close removes the private copy. A process already started from it runs on; a
// later Path verifies and copies the package's file again.
func (p *Pinned) Close() error {
	p.mu.Lock()
	dir := p.dir
	p.dir, p.file, p.info = "", "", nil
	p.mu.Unlock()
	if dir == "" {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove the private copy of %s: %w", p.name, err)
	}
	return nil
}

// sameCopy reports whether the copy was left as written.
func sameCopy(was, now fs.FileInfo) bool {
	return os.SameFile(was, now) && was.Size() == now.Size() && was.Mode() == now.Mode() &&
		was.ModTime().Equal(now.ModTime()) && changeTime(was) == changeTime(now)
}

// pin copies the executable at name in fsys into a new private directory while
// hashing it, so that the file is read once and the copy holds exactly the bytes
// hashed, and returns the directory and the copy's path when their sha256 is
// expected. It refuses what Read refuses.
func pin(fsys fs.FS, name, expected string) (dir, file string, err error) {
	// Checked before opening, as opening a FIFO blocks, and again on what was
	// opened, in case the file was swapped meanwhile.
	info, err := fs.Stat(fsys, name)
	if err != nil {
		return "", "", fmt.Errorf("read executable %s: %w", name, err)
	}
	if err := readable(name, info); err != nil {
		return "", "", err
	}
	src, err := fsys.Open(name)
	if err != nil {
		return "", "", fmt.Errorf("read executable %s: %w", name, err)
	}
	defer func() { _ = src.Close() }()
	if info, err = src.Stat(); err != nil {
		return "", "", fmt.Errorf("read executable %s: %w", name, err)
	}
	if err := readable(name, info); err != nil {
		return "", "", err
	}
	private, err := os.MkdirTemp("", "kubeplug-plugin-")
	if err != nil {
		return "", "", fmt.Errorf("copy executable %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(private)
		}
	}()
	file = filepath.Join(private, filepath.Base(filepath.FromSlash(name)))
	dst, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err != nil {
		return "", "", fmt.Errorf("copy executable %s: %w", name, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(dst, h), io.LimitReader(src, maxExecutable+1))
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	var readErr *fs.PathError
	switch {
	case err != nil && errors.As(err, &readErr) && readErr.Path != file:
		return "", "", fmt.Errorf("read executable %s: %w", name, err)
	case err != nil:
		return "", "", fmt.Errorf("copy executable %s: %w", name, err)
	case n > maxExecutable:
		return "", "", fmt.Errorf("read executable %s: more than the limit of %d bytes", name, maxExecutable)
	}
	if actual := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(actual, expected) {
		return "", "", &DigestError{Path: name, Expected: expected, Actual: actual}
	}
	// Nothing writes the copy again, by accident at least.
	if err := os.Chmod(file, 0o500); err != nil {
		return "", "", fmt.Errorf("copy executable %s: %w", name, err)
	}
	return private, file, nil
}
