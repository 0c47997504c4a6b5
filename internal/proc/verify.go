package proc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrDigestMismatch is wrapped by a *DigestError.
var ErrDigestMismatch = errors.New("executable digest mismatch")

// DigestError says an executable is not the one plugin.yaml pins.
type DigestError struct {
	// Path is the executable's path inside the package.
	Path string
	// Expected is spec.runtime.sha256; Actual is the digest of the file found.
	Expected, Actual string
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("refusing to run %s: its sha256 is %s, but plugin.yaml expects %s", e.Path, e.Actual, e.Expected)
}

// Unwrap returns ErrDigestMismatch.
func (e *DigestError) Unwrap() error { return ErrDigestMismatch }

// maxExecutable bounds how much of an executable is read into memory.
const maxExecutable = 512 << 20

// Verified reads the executable at name in fsys once and returns its bytes when
// their sha256 is expected (hex). Callers run these bytes, never the file again,
// so the file cannot be swapped between the check and the run.
func Verified(fsys fs.FS, name, expected string) ([]byte, error) {
	b, err := Read(fsys, name)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	actual := hex.EncodeToString(sum[:])
	if !strings.EqualFold(actual, expected) {
		return nil, &DigestError{Path: name, Expected: expected, Actual: actual}
	}
	return b, nil
}

// Read reads the executable at name in fsys once, refusing anything but a regular
// file within the size limit. It is Verified without a pinned digest, for
// executables plugin.yaml does not pin (validate exec checks); callers still run
// the bytes returned, never the file again.
func Read(fsys fs.FS, name string) ([]byte, error) {
	info, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("read executable %s: %w", name, err)
	}
	if err := readable(name, info); err != nil {
		return nil, err
	}
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("read executable %s: %w", name, err)
	}
	return b, nil
}

// readable refuses an executable that is not a regular file within the size
// limit.
func readable(name string, info fs.FileInfo) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("read executable %s: not a regular file", name)
	}
	if info.Size() > maxExecutable {
		return fmt.Errorf("read executable %s: %d bytes is more than the limit of %d", name, info.Size(), maxExecutable)
	}
	return nil
}

// Private writes b into a new private directory (0700) as an executable (0700)
// named after name's base, and returns the directory and the file's path. The
// caller removes the directory.
func Private(b []byte, name string) (dir, file string, err error) {
	dir, err = os.MkdirTemp("", "kubeplug-plugin-")
	if err != nil {
		return "", "", fmt.Errorf("copy executable %s: %w", name, err)
	}
	file = filepath.Join(dir, filepath.Base(filepath.FromSlash(name)))
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err == nil {
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", "", fmt.Errorf("copy executable %s: %w", name, err)
	}
	return dir, file, nil
}

// PackageDir returns the package's directory when location is a real directory
// on disk (packages loaded from a source directory), and "" otherwise (built-in
// packages and others without one).
func PackageDir(location string) string {
	if location == "" {
		return ""
	}
	if info, err := os.Stat(location); err == nil && info.IsDir() {
		if abs, err := filepath.Abs(location); err == nil {
			return abs
		}
	}
	return ""
}
