package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// recordSelector selects kubeplug's release records (state.LabelOwner).
const recordSelector = "owner=kubeplug"

// hub hands each change to every open event stream. A stream that is behind
// loses nothing that matters: a change only says "look again", so one pending
// notice stands for any number.
type hub struct {
	mu   sync.Mutex
	subs map[chan struct{}]bool
}

func newHub() *hub { return &hub{subs: map[chan struct{}]bool{}} }

func (h *hub) subscribe() (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	h.mu.Lock()
	h.subs[c] = true
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		delete(h.subs, c)
		h.mu.Unlock()
	}
}

func (h *hub) notify() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.subs {
		select {
		case c <- struct{}{}:
		default: // one notice is already pending
		}
	}
}

// watch follows the release records through an informer (the API server's
// watch, re-listed only when the watch breaks) and notifies the hub of every
// change after the initial list, coalesced over a short quiet period: an apply
// writes a record more than once. It returns when ctx is cancelled.
func (s *Server) watch(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(s.core, 0, informers.WithNamespace(s.opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = recordSelector }))
	inf := f.Core().V1().Secrets().Informer()
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	// The handler never sees a Secret's data: it only says that one changed.
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				poke(obj)
			}
		},
		UpdateFunc: func(_, obj any) { poke(obj) },
		DeleteFunc: poke,
	}); err != nil {
		return fmt.Errorf("watching the release records: %w", err)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	const quiet = 250 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		t := time.NewTimer(quiet)
		for wait := true; wait; {
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-changed:
				t.Reset(quiet)
			case <-t.C:
				wait = false
			}
		}
		s.hub.notify()
	}
}

// events streams server-sent events to a page: "plugins" whenever a release
// record changed, and a comment now and then so proxies keep the stream open.
// htmx's sse extension turns each event into a request for the fragment that
// shows it.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	c, done := s.hub.subscribe()
	defer done()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, ": kubeplug dashboard events\n\n")
	fl.Flush()
	tick := time.NewTicker(20 * time.Second)
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			_, _ = fmt.Fprint(w, ": still here\n\n")
		case <-c:
			n++
			_, _ = fmt.Fprintf(w, "event: plugins\ndata: %d\n\n", n)
		}
		fl.Flush()
	}
}
