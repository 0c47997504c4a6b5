package ssa

import (
	"container/heap"
	"sync"
)

// pipe bounds the applies in flight across every ApplyAll call of an Applier,
// and gives a place that frees up to the waiting apply of the highest
// priority, the first come among equals. Units applied at once share it: the
// objects of a plugin others wait for go first, so that its dependents start
// while the pipe is still full of the rest, instead of after it, at the end,
// alone in a pipe that empties.
type pipe struct {
	mu      sync.Mutex
	free    int
	seq     uint64
	waiting waiters
}

func newPipe(width int) *pipe { return &pipe{free: width} }

// acquire waits for a place in the pipe.
func (p *pipe) acquire(priority int) {
	p.mu.Lock()
	if p.free > 0 && len(p.waiting) == 0 {
		p.free--
		p.mu.Unlock()
		return
	}
	w := &waiter{priority: priority, seq: p.seq, ready: make(chan struct{})}
	p.seq++
	heap.Push(&p.waiting, w)
	p.mu.Unlock()
	<-w.ready
}

// release frees a place: it goes to the first waiting apply, if any.
func (p *pipe) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.waiting) == 0 {
		p.free++
		return
	}
	close(heap.Pop(&p.waiting).(*waiter).ready)
}

type waiter struct {
	priority int
	seq      uint64
	ready    chan struct{}
}

// waiters is a heap of waiting applies: the highest priority first, then the
// earliest.
type waiters []*waiter

func (h waiters) Len() int { return len(h) }
func (h waiters) Less(i, j int) bool {
	if h[i].priority != h[j].priority {
		return h[i].priority > h[j].priority
	}
	return h[i].seq < h[j].seq
}
func (h waiters) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *waiters) Push(x any)   { *h = append(*h, x.(*waiter)) }
func (h *waiters) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return w
}
