package controller

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/state"
	"github.com/kubeplug/kubeplug/pkg/lease"
)

// leases keeps the operation lease of each cluster the controller works on:
// taken by the first apply there, shared by the applies that overlap it, and
// released once no apply has needed it for idle. So a burst of installations on
// one cluster costs one lease, and the CLI waits (or fails naming the holder,
// "controller") only while the controller works there.
type leases struct {
	idle time.Duration
	log  *slog.Logger

	mu   sync.Mutex
	held map[string]*held
}

type held struct {
	// ready is closed once the lease is taken (or failed: err).
	ready   chan struct{}
	err     error
	ctx     context.Context
	release func(context.Context) error
	users   int
	timer   *time.Timer
}

func newLeases(idle time.Duration, log *slog.Logger) *leases {
	return &leases{idle: idle, log: log, held: map[string]*held{}}
}

// acquire holds the lease of the cluster key for the caller until done is
// called. The returned context is done when ctx is, or when the lease is lost.
//
// Taking the lease anew invalidates heads, the cluster's shared release
// records: another writer (the CLI) may have written while the controller did
// not hold it. While it holds the lease, no one else writes, and its own
// writes keep heads current.
func (ls *leases) acquire(ctx context.Context, key string, c *kube.Client, heads *state.Heads) (context.Context, func(), error) {
	ls.mu.Lock()
	h := ls.held[key]
	if h == nil {
		h = &held{ready: make(chan struct{})}
		ls.held[key] = h
		go ls.take(key, h, c, heads)
	}
	h.users++
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	ls.mu.Unlock()
	select {
	case <-h.ready:
	case <-ctx.Done():
		ls.done(key, h)
		return ctx, func() {}, ctx.Err()
	}
	if h.err != nil {
		ls.done(key, h)
		return ctx, func() {}, h.err
	}
	if h.ctx.Err() != nil { // lost (expired while the controller was stuck): take it again
		ls.mu.Lock()
		if ls.held[key] == h {
			delete(ls.held, key)
		}
		ls.mu.Unlock()
		ls.done(key, h)
		return ls.acquire(ctx, key, c, heads)
	}
	opCtx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(h.ctx, func() { cancel(context.Cause(h.ctx)) })
	return opCtx, func() {
		stop()
		cancel(nil)
		ls.done(key, h)
	}, nil
}

// take takes the lease for h, waiting for another holder (the CLI) as long as it
// holds it.
func (ls *leases) take(key string, h *held, c *kube.Client, heads *state.Heads) {
	heads.Invalidate() // before the lease is taken: a read after it lists again
	opCtx, release, err := lease.Lock(context.Background(), c, lease.Options{
		Operation: "controller", Wait: 10 * time.Minute, Namespace: "kubeplug-system", Duration: 10 * time.Second,
		Waiting: func(e *lease.LockedError) {
			ls.log.Info("waiting for the cluster's operation lease", "cluster", key, "holder", e.Holder, "operation", e.Operation)
		},
	})
	ls.mu.Lock()
	h.ctx, h.release, h.err = opCtx, release, err
	close(h.ready)
	if err != nil {
		delete(ls.held, key) // the next acquire tries again
	} else if h.users == 0 {
		ls.idleLocked(key, h) // everyone gave up waiting
	}
	ls.mu.Unlock()
}

// done drops one user; the last one starts the idle timer that releases it.
func (ls *leases) done(key string, h *held) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	h.users--
	if h.users > 0 || h.err != nil {
		return
	}
	select {
	case <-h.ready:
		ls.idleLocked(key, h)
	default: // still being taken: take starts the timer
	}
}

// idleLocked starts the timer that releases h after idle, unless a user comes.
func (ls *leases) idleLocked(key string, h *held) {
	h.timer = time.AfterFunc(ls.idle, func() {
		ls.mu.Lock()
		if h.users > 0 || ls.held[key] != h {
			ls.mu.Unlock()
			return
		}
		delete(ls.held, key)
		ls.mu.Unlock()
		ls.free(key, h)
	})
}

func (ls *leases) free(key string, h *held) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.release(ctx); err != nil {
		ls.log.Warn("could not release the operation lease; it expires by itself", "cluster", key, "error", err)
	}
}

// releaseAll frees every lease held (the controller stops).
func (ls *leases) releaseAll() {
	ls.mu.Lock()
	all := ls.held
	ls.held = map[string]*held{}
	ls.mu.Unlock()
	for key, h := range all {
		select {
		case <-h.ready:
			if h.err == nil {
				if h.timer != nil {
					h.timer.Stop()
				}
				ls.free(key, h)
			}
		default:
		}
	}
}
