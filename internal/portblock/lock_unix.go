//go:build unix

package portblock

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile opens path (creating it readable by all) and takes an exclusive
// flock on it without waiting; ok is false when another holds it.
func lockFile(path string) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644) //nolint:gosec // the machine's shared lock directory
	if errors.Is(err, os.ErrPermission) {
		// Another user's lock file: a shared lock needs no write access.
		f, err = os.Open(path) //nolint:gosec // as above
	}
	if err != nil {
		return nil, false, fmt.Errorf("port block lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil { //nolint:gosec // a file descriptor fits an int
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, true, nil
}
