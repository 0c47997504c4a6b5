//go:build unix

package k8sversions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lock holds version v's cache directory for this process until the returned
// func: a second kubeplug filling the same version waits (or gives up when ctx
// ends), then finds the files the first one fetched.
func (c *Cache) lock(ctx context.Context, v Version) (func(), error) {
	dir := filepath.Join(c.Dir, v.Kubernetes)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	path := filepath.Join(dir, ".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600) //nolint:gosec // inside the cache dir
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for waited := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) //nolint:gosec // a file descriptor fits an int
		if err == nil {
			return func() { _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !waited {
			c.Progress("waiting for another kubeplug filling the cache of Kubernetes " + v.Kubernetes)
			waited = true
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("wait for the lock %s: %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
