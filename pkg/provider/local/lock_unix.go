//go:build unix

package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lock keeps two kubeplug processes from working on one state dir at once; the
// lock ends with the returned func or with the process.
func (p *Provider) lock() (func(), error) {
	if err := os.MkdirAll(p.opts.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	path := filepath.Join(p.opts.StateDir, lockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600) //nolint:gosec // inside the state dir
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil { //nolint:gosec // a file descriptor fits an int
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("cluster %s: another kubeplug is working on its state directory %s; wait for it to finish", p.opts.ClusterName, p.opts.StateDir)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}
