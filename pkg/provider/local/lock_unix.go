//go:build unix

package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kubeplug/kubeplug/pkg/provider"
)

// lockPoll is how often Lock tries the lock again while another run holds it.
const lockPoll = 200 * time.Millisecond

// lock keeps two kubeplug processes from working on one state dir at once; the
// lock ends with the returned func or with the process. Under Lock, it takes
// nothing: the run holds the lock already.
func (p *Provider) lock(ctx context.Context) (func(), error) {
	if p.held {
		return func() {}, nil
	}
	return p.flock(ctx, "", 0, nil)
}

// Lock implements provider.Locker: the state directory's lock, waited for.
func (p *Provider) Lock(ctx context.Context, op string, wait time.Duration, waiting func(holder, op string, waited time.Duration)) (func(), error) {
	if p.held {
		return nil, errors.New("local provider: Lock called twice")
	}
	// A run that finds no state directory creates one for its lock; if the run
	// then leaves nothing else there (it was refused), the directory goes again.
	_, err := os.Stat(p.opts.StateDir)
	created := errors.Is(err, fs.ErrNotExist)
	unlock, err := p.flock(ctx, op, wait, waiting)
	if err != nil {
		if created {
			p.removeIfOnlyLock()
		}
		return nil, err
	}
	p.held = true
	return func() {
		p.held = false
		unlock()
		if created {
			p.removeIfOnlyLock()
		}
	}, nil
}

// removeIfOnlyLock removes the state directory when it holds only the lock file.
func (p *Provider) removeIfOnlyLock() {
	entries, err := os.ReadDir(p.opts.StateDir)
	if err != nil || len(entries) > 1 || len(entries) == 1 && entries[0].Name() != lockFile {
		return
	}
	_ = os.Remove(filepath.Join(p.opts.StateDir, lockFile))
	_ = os.Remove(p.opts.StateDir)
}

// flock takes the state dir's lock, trying again every lockPoll for up to wait,
// and writes who holds it (op and pid) into the lock file for the runs that
// wait.
func (p *Provider) flock(ctx context.Context, op string, wait time.Duration, waiting func(holder, op string, waited time.Duration)) (func(), error) {
	if err := os.MkdirAll(p.opts.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	path := filepath.Join(p.opts.StateDir, lockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600) //nolint:gosec // inside the state dir
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	start := time.Now()
	var told time.Time
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) //nolint:gosec // a file descriptor fits an int
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		holder, hop := readHolder(path)
		waited := time.Since(start)
		if waited >= wait {
			_ = f.Close()
			by := "another kubeplug"
			if holder != "" {
				by += " (" + strings.TrimSpace(hop+" "+holder) + ")"
			}
			if wait <= 0 {
				return nil, busyError(fmt.Sprintf("cluster %s: %s is working on its state directory %s; wait for it to finish", p.opts.ClusterName, by, p.opts.StateDir))
			}
			return nil, busyError(fmt.Sprintf("cluster %s: %s is still working on its state directory %s after waiting %s; wait longer with --lock-timeout, or run again once it is done",
				p.opts.ClusterName, by, p.opts.StateDir, waited.Round(time.Second)))
		}
		if waiting != nil && (told.IsZero() || time.Since(told) >= 10*time.Second) {
			told = time.Now()
			waiting(holder, hop, waited)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("cluster %s: waiting for another kubeplug to finish with its state directory: %w", p.opts.ClusterName, ctx.Err())
		case <-time.After(min(lockPoll, wait-waited)):
		}
	}
	if op == "" {
		op = "kubeplug"
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(fmt.Sprintf("%s\npid %d\n", op, os.Getpid())), 0)
	}
	return func() {
		_ = f.Truncate(0)
		_ = f.Close()
	}, nil
}

// busyError says who holds the lock, and is provider.ErrBusy.
type busyError string

func (e busyError) Error() string { return string(e) }

func (busyError) Is(target error) bool { return target == provider.ErrBusy }

// readHolder reads the operation and holder ("pid N") the lock's holder wrote.
func readHolder(path string) (holder, op string) {
	b, err := os.ReadFile(path) //nolint:gosec // inside the state dir
	if err != nil {
		return "", ""
	}
	lines := strings.SplitN(strings.TrimSpace(string(b)), "\n", 2)
	if len(lines) < 2 {
		return "", ""
	}
	return strings.TrimSpace(lines[1]), strings.TrimSpace(lines[0])
}
