package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeplug/kubeplug/pkg/action"
)

// watchedSet is the resources objectWatches has an informer for.
type watchedSet = map[schema.GroupVersionResource]bool

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
// watch, re-listed only when the watch breaks), and the objects the installed
// plugins own through metadata-only informers (objectWatches), and notifies
// the hub of every change after the initial lists, coalesced over a short
// quiet period: an apply writes a record more than once, and a rollout changes
// a Deployment's status many times. It returns when ctx is cancelled.
func (s *Server) watch(ctx context.Context) error {
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	shutdown, err := WatchRecords(ctx, s.core, s.opts.Namespace, func() { poke(nil) })
	if err != nil {
		return err
	}
	defer shutdown()
	objects := s.objectWatches(ctx, poke)
	defer objects.Shutdown()
	fleet := s.fleetWatches(ctx, poke)
	defer fleet.Shutdown()
	const quiet, minInterval = 300 * time.Millisecond, time.Second
	for Settled(ctx, changed, quiet) {
		s.hub.notify()
		// A record changed, or an object did: the plugins may own kinds
		// not watched yet.
		s.watchResources(ctx, objects, poke)
		// Each notice makes every open page read the cluster again: at most
		// one a second, however busy the cluster is (a rollout).
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(minInterval):
		}
	}
	return nil
}

// WatchRecords follows kubeplug's release records in namespace through an
// informer (the API server's watch, re-listed only when the watch breaks) and
// calls changed on every change after the initial list; the handler never sees
// a record's data, only that one changed. It returns at once; shutdown stops
// the watch. The dashboard's live pages and kubeplug status --watch both
// follow the records this way.
func WatchRecords(ctx context.Context, core kubernetes.Interface, namespace string, changed func()) (shutdown func(), err error) {
	f := informers.NewSharedInformerFactoryWithOptions(core, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = recordSelector }))
	inf := f.Core().V1().Secrets().Informer()
	poke := func(any) { changed() }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				poke(obj)
			}
		},
		UpdateFunc: func(_, obj any) { poke(obj) },
		DeleteFunc: poke,
	}); err != nil {
		return nil, fmt.Errorf("watching the release records: %w", err)
	}
	f.Start(ctx.Done())
	return f.Shutdown, nil
}

// objectWatches starts watching the objects of the installed plugins: only
// their metadata (never a Secret's data), only objects labelled with their
// plugin (what kubeplug applies).
func (s *Server) objectWatches(ctx context.Context, poke func(any)) metadatainformer.SharedInformerFactory {
	f := metadatainformer.NewFilteredSharedInformerFactory(s.meta, 0, metav1.NamespaceAll, func(o *metav1.ListOptions) { o.LabelSelector = pluginLabel })
	s.watchResources(ctx, f, poke)
	return f
}

// pluginLabel selects the objects kubeplug applies (kube.LabelPlugin).
const pluginLabel = "kubeplug.dev/plugin"

// watchResources adds an informer to f for every resource of the installed
// plugins' objects that has none yet (action.Status.Resources).
func (s *Server) watchResources(ctx context.Context, f metadatainformer.SharedInformerFactory, poke func(any)) {
	a := action.NewStatus(s.opts.Config)
	a.Target = s.opts.Target
	gvrs, l := a.Resources(ctx)
	if l.HasFatal() {
		s.opts.Logger.Warn("cannot list the plugins' kinds to watch; objects will show changes on the next page load", "problems", strings.Join(problems(l), "; "))
		return
	}
	s.watchedMu.Lock()
	defer s.watchedMu.Unlock()
	added := false
	for _, gvr := range gvrs {
		if s.watched[gvr] {
			continue
		}
		s.watched[gvr] = true
		added = true
		_, err := f.ForResource(gvr).Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if !initial {
					poke(obj)
				}
			},
			UpdateFunc: func(_, obj any) { poke(obj) },
			DeleteFunc: poke,
		})
		if err != nil {
			s.opts.Logger.Warn("cannot watch a kind of the plugins' objects", "resource", gvr.String(), "error", err)
		}
	}
	if added {
		f.Start(ctx.Done())
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

// Settled waits for a signal on changed, then until none has come for quiet,
// so that a burst of changes (an apply writes a record more than once) is
// one. It reports false when ctx ends first.
func Settled(ctx context.Context, changed <-chan struct{}, quiet time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-changed:
	}
	t := time.NewTimer(quiet)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-changed:
			t.Reset(quiet)
		case <-t.C:
			return true
		}
	}
}
