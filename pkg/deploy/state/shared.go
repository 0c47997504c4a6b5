package state

import "sync"

// Heads is one namespace's record heads, decoded, shared by the Secrets stores
// of many runs against the same cluster (a controller's applies): the first
// read of every head lists and decodes them, later reads and every store's
// writes and deletes keep it current, so a run reads them without a LIST.
//
// Its records are never changed in place (a write stores a clone): a read gets
// shallow copies of them, whose slices and maps it must clone before it
// changes them, as every writer of a record does (Record.Clone). So a read of
// thousands of heads copies a few hundred bytes per head, no more.
//
// It holds the records only (no objects: those are read when a rollback or
// prune needs them), so its memory is one decoded record per revision,
// whatever the number of runs.
//
// What it knows is trusted only while no other writer can write: the holder of
// the cluster's operation lease calls Invalidate whenever it takes the lease
// anew (another writer may have written since it last held it), and the next
// read lists again.
type Heads struct {
	mu    sync.Mutex
	valid bool
	// recs holds each head by name; sorted is them by plugin and revision,
	// nil when it must be sorted again.
	recs   map[string]*Record
	sorted []*Record
	// byPlugin holds each plugin's part of sorted, made with it.
	byPlugin map[string][]*Record
	// listing counts the LISTs in flight; pending holds what was written (a
	// record) or deleted (nil) meanwhile, by head name, which a LIST that
	// began before may not show.
	listing int
	pending map[string]*Record
	// lists counts the LISTs made.
	lists int
}

// NewHeads returns an empty shared view: its first read lists.
func NewHeads() *Heads { return &Heads{recs: map[string]*Record{}} }

// Invalidate makes the next read list the heads again.
func (h *Heads) Invalidate() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.valid = false
	h.mu.Unlock()
}

// Lists is how many times the heads were listed.
func (h *Heads) Lists() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lists
}

// all returns clones of every head, sorted by plugin and revision; ok is false
// when they must be listed first.
func (h *Heads) all() (out []*Record, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.valid {
		return nil, false
	}
	h.sort()
	return shallow(h.sorted), true
}

// of returns shallow copies of one plugin's heads, oldest first; ok is false
// when they must be listed first.
func (h *Heads) of(plugin string) (out []*Record, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.valid {
		return nil, false
	}
	h.sort()
	return shallow(h.byPlugin[plugin]), true
}

// sort makes sorted and byPlugin, when a change dropped them.
func (h *Heads) sort() {
	if h.sorted != nil {
		return
	}
	h.sorted = make([]*Record, 0, len(h.recs))
	for _, r := range h.recs {
		h.sorted = append(h.sorted, r)
	}
	sortRecords(h.sorted)
	h.byPlugin = map[string][]*Record{}
	for i := 0; i < len(h.sorted); {
		j := i + 1
		for j < len(h.sorted) && h.sorted[j].Plugin == h.sorted[i].Plugin {
			j++
		}
		h.byPlugin[h.sorted[i].Plugin] = h.sorted[i:j:j]
		i = j
	}
}

// shallow copies recs' records, in one allocation.
func shallow(recs []*Record) []*Record {
	copies := make([]Record, len(recs))
	out := make([]*Record, len(recs))
	for i, r := range recs {
		copies[i] = *r
		out[i] = &copies[i]
	}
	return out
}

// begin is called before a LIST whose records fill (or, when it fails, end)
// will take.
func (h *Heads) begin() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.listing == 0 {
		h.pending = map[string]*Record{}
	}
	h.listing++
}

// end closes a LIST begun; recs, when not nil, replace what is known, with
// the writes and deletes made while it ran applied on top.
func (h *Heads) end(recs []*Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if recs != nil {
		h.recs = make(map[string]*Record, len(recs))
		for _, r := range recs {
			h.recs[recordName(r.Plugin, r.Revision)] = r.Clone()
		}
		for name, r := range h.pending {
			if r == nil {
				delete(h.recs, name)
			} else {
				h.recs[name] = r
			}
		}
		h.valid, h.sorted = true, nil
		h.lists++
	}
	if h.listing--; h.listing == 0 {
		h.pending = nil
	}
}

// put records a head written.
func (h *Heads) put(r *Record) {
	if h == nil {
		return
	}
	name := recordName(r.Plugin, r.Revision)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs[name], h.sorted = r.Clone(), nil
	if h.pending != nil {
		h.pending[name] = h.recs[name]
	}
}

// drop forgets a head deleted (a name that is no head is ignored).
func (h *Heads) drop(name string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.recs[name]; ok {
		delete(h.recs, name)
		h.sorted = nil
	}
	if h.pending != nil {
		h.pending[name] = nil
	}
}
