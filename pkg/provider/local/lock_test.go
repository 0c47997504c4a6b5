//go:build unix

package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/provider"
)

// TestLockWaits: a second run waits for the first one's lock (up waits as
// apply waits for the lease), is told who holds it, takes it once it is free,
// and fails with ErrBusy naming the holder when the wait runs out. While held,
// the provider's own methods do not lock again.
func TestLockWaits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	p1, _ := New(Options{ClusterName: "c", StateDir: dir})
	p2, _ := New(Options{ClusterName: "c", StateDir: dir})
	ctx := context.Background()
	unlock1, err := p1.Lock(ctx, "up", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := p1.lock(context.Background())
	if err != nil {
		t.Fatalf("the holder's own lock: %v", err)
	}
	inner()

	// The wait runs out: ErrBusy, naming the holder.
	start := time.Now()
	var told []string
	_, err = p2.Lock(ctx, "up", 500*time.Millisecond, func(holder, op string, _ time.Duration) { told = append(told, op+" "+holder) })
	if !errors.Is(err, provider.ErrBusy) || !strings.Contains(err.Error(), "another kubeplug (up pid "+strconv.Itoa(os.Getpid())+") is still working on its state directory") {
		t.Errorf("Lock while held = %v, want ErrBusy naming up and pid", err)
	}
	if d := time.Since(start); d < 500*time.Millisecond || d > 3*time.Second {
		t.Errorf("Lock gave up after %s, want after its wait of 500ms", d)
	}
	if len(told) != 1 || told[0] != "up pid "+strconv.Itoa(os.Getpid()) {
		t.Errorf("waiting was told %q, want once, up and the holder's pid", told)
	}

	// The holder finishes while the second waits: the second takes it.
	go func() { time.Sleep(300 * time.Millisecond); unlock1() }()
	unlock2, err := p2.Lock(ctx, "up", time.Minute, nil)
	if err != nil {
		t.Fatalf("Lock after the holder finished: %v", err)
	}
	unlock2()

	// Cancelled while waiting.
	unlock1, _ = p1.Lock(ctx, "up", 0, nil)
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := p2.Lock(cctx, "up", time.Minute, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock cancelled = %v, want the context's error", err)
	}
	unlock1()
}

// TestLockLeavesNoStateDir: a run refused after it took the lock of a cluster
// that had no state directory leaves none behind.
func TestLockLeavesNoStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	p, _ := New(Options{ClusterName: "c", StateDir: dir})
	unlock, err := p.Lock(context.Background(), "up", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir after a run that wrote nothing: %v, want none", err)
	}
}
