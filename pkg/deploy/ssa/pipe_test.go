package ssa

import (
	"sync"
	"testing"
	"time"
)

// TestPipeGivesAFreedPlaceToTheHighestPriority fills a pipe of two, queues
// applies of priorities 0, 2, 1 and 2, and frees places one at a time: they go
// to the highest priority, the first come among equals.
func TestPipeGivesAFreedPlaceToTheHighestPriority(t *testing.T) {
	p := newPipe(2)
	p.acquire(0)
	p.acquire(0)
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i, w := range []struct {
		name     string
		priority int
	}{{"low", 0}, {"high-1", 2}, {"mid", 1}, {"high-2", 2}} {
		wg.Go(func() {
			p.acquire(w.priority)
			mu.Lock()
			order = append(order, w.name)
			mu.Unlock()
		})
		// Queued one after another, so that "first come" is defined.
		for deadline := time.Now().Add(5 * time.Second); ; {
			p.mu.Lock()
			n := len(p.waiting)
			p.mu.Unlock()
			if n == i+1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	for range 4 {
		p.release()
		time.Sleep(20 * time.Millisecond) // the one released records itself
	}
	wg.Wait()
	want := []string{"high-1", "high-2", "mid", "low"}
	if len(order) != len(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
	// The two places taken first and the four handed on: released, the pipe
	// holds two free places again.
	p.release()
	p.release()
	if p.free != 2 || len(p.waiting) != 0 {
		t.Errorf("free %d, waiting %d; want 2 and 0", p.free, len(p.waiting))
	}
}
