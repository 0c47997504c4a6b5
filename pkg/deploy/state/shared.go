package state

import (
	"context"
	"maps"
	"slices"
	"sync"
)

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
	// nil when it must be sorted again (only a read of every head needs it).
	recs   map[string]*Record
	sorted []*Record
	// byPlugin holds each plugin's heads by revision, and byOwner the plugins
	// whose newest head is the owner's ("" the CLI's): both kept current by
	// every write and delete, so that a run reads its own plugins without
	// copying or sorting every head of the cluster.
	byPlugin map[string][]*Record
	byOwner  map[string]map[string]bool
	owner    map[string]string // plugin -> owner of its newest head
	// legacy holds the ConfigMap inventories of an older kubeplug, listed with
	// the heads, by plugin; deleting one drops it.
	legacy map[string]*Record
	// chunks holds every chunk Secret's name by plugin, listed (by metadata)
	// with the heads, kept current by every store's creates and deletes: the
	// cleanup after each write asks it instead of a LIST per run.
	chunks map[string]map[string]bool
	// listing counts the LISTs in flight; pending holds what was written (a
	// record) or deleted (nil) meanwhile, by head name, which a LIST that
	// began before may not show.
	listing int
	pending map[string]*Record
	// filling is held by the one fill listing.
	filling chan struct{}
	// pendingLegacy names the legacy inventories deleted meanwhile, and
	// pendingChunks the chunks created or deleted.
	pendingLegacy []string
	pendingChunks []chunkChange
	// lists counts the LISTs made.
	lists int
}

// NewHeads returns an empty shared view: its first read lists.
func NewHeads() *Heads {
	return &Heads{recs: map[string]*Record{}, byPlugin: map[string][]*Record{}, byOwner: map[string]map[string]bool{}, owner: map[string]string{}, filling: make(chan struct{}, 1)}
}

// fill lists into h with list, unless h is valid: one LIST at a time, the
// others waiting for it (the first reads after a restart, or after the lease
// is taken anew, would each list every head at once otherwise: N workers
// holding N copies of every head of the cluster).
func (h *Heads) fill(ctx context.Context, list func() (listed, error)) error {
	select {
	case h.filling <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	defer func() { <-h.filling }()
	h.mu.Lock()
	valid := h.valid
	h.mu.Unlock()
	if valid {
		return nil
	}
	h.begin()
	l, err := list()
	if err != nil {
		h.end(listed{})
		return err
	}
	h.end(l)
	return nil
}

// listed is what fills Heads: every head, legacy inventory and chunk name.
type listed struct {
	heads, legacy []*Record
	chunks        map[string]map[string]bool
}

// chunksOf returns a plugin's chunk names, sorted; ok is false when they must
// be listed first.
func (h *Heads) chunksOf(plugin string) (out []string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.valid || h.chunks == nil {
		return nil, false
	}
	return slices.Sorted(maps.Keys(h.chunks[plugin])), true
}

// chunk records a chunk created (present) or deleted.
func (h *Heads) chunk(plugin, name string, present bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	setChunk(h.chunks, plugin, name, present)
	if h.pending != nil {
		h.pendingChunks = append(h.pendingChunks, chunkChange{plugin, name, present})
	}
}

type chunkChange struct {
	plugin, name string
	present      bool
}

func setChunk(chunks map[string]map[string]bool, plugin, name string, present bool) {
	switch {
	case chunks == nil:
	case present && chunks[plugin] == nil:
		chunks[plugin] = map[string]bool{name: true}
	case present:
		chunks[plugin][name] = true
	default:
		delete(chunks[plugin], name)
	}
}

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
	return shallow(h.byPlugin[plugin]), true
}

// histories returns shallow copies of the heads of plugins and of every
// plugin whose newest head is owner's, by plugin, oldest first, with the
// legacy inventories of those that have no head; ok is false when they must be
// listed first. Its cost is that of the plugins it returns, whatever the
// number of heads.
func (h *Heads) histories(owner string, plugins []string) (out map[string][]*Record, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.valid {
		return nil, false
	}
	out = map[string][]*Record{}
	add := func(p string) {
		if _, done := out[p]; done {
			return
		}
		if hs := h.byPlugin[p]; len(hs) > 0 {
			out[p] = shallow(hs)
		} else if r := h.legacy[p]; r != nil {
			out[p] = shallow([]*Record{r})
		}
	}
	for p := range h.byOwner[owner] {
		add(p)
	}
	for p, r := range h.legacy {
		if r.Owner == owner && len(h.byPlugin[p]) == 0 {
			add(p)
		}
	}
	for _, p := range plugins {
		add(p)
	}
	return out, true
}

// index makes byPlugin and byOwner say what plugin's heads are now.
func (h *Heads) index(plugin string) {
	if o, ok := h.owner[plugin]; ok {
		delete(h.byOwner[o], plugin)
		if len(h.byOwner[o]) == 0 {
			delete(h.byOwner, o)
		}
		delete(h.owner, plugin)
	}
	hs := h.byPlugin[plugin]
	if len(hs) == 0 {
		delete(h.byPlugin, plugin)
		return
	}
	o := hs[len(hs)-1].Owner
	h.owner[plugin] = o
	if h.byOwner[o] == nil {
		h.byOwner[o] = map[string]bool{}
	}
	h.byOwner[o][plugin] = true
}

// setHead puts r (owned by h) in byPlugin in place of the head of its
// revision, if any, and indexes its plugin.
func (h *Heads) setHead(r *Record) {
	hs := slices.DeleteFunc(slices.Clone(h.byPlugin[r.Plugin]), func(k *Record) bool { return k.Revision == r.Revision })
	i, _ := slices.BinarySearchFunc(hs, r.Revision, func(k *Record, rev int) int { return k.Revision - rev })
	h.byPlugin[r.Plugin] = slices.Insert(hs, i, r)
	h.index(r.Plugin)
}

// dropLegacy forgets a plugin's legacy inventory, deleted.
func (h *Heads) dropLegacy(plugin string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.legacy, plugin)
	if h.pending != nil {
		h.pendingLegacy = append(h.pendingLegacy, plugin)
	}
}

// sort makes sorted, when a change dropped it.
func (h *Heads) sort() {
	if h.sorted != nil {
		return
	}
	h.sorted = make([]*Record, 0, len(h.recs))
	for _, r := range h.recs {
		h.sorted = append(h.sorted, r)
	}
	sortRecords(h.sorted)
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

// end closes a LIST begun; recs, when not nil, replace what is known (and
// legacy the legacy inventories), with the writes and deletes made while it
// ran applied on top.
func (h *Heads) end(l listed) {
	recs, legacy := l.heads, l.legacy
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
		h.legacy = make(map[string]*Record, len(legacy))
		for _, r := range legacy {
			h.legacy[r.Plugin] = r.Clone()
		}
		for _, p := range h.pendingLegacy {
			delete(h.legacy, p)
		}
		h.chunks = l.chunks
		for _, c := range h.pendingChunks {
			setChunk(h.chunks, c.plugin, c.name, c.present)
		}
		h.reindex()
		h.valid, h.sorted = true, nil
		h.lists++
	}
	if h.listing--; h.listing == 0 {
		h.pending, h.pendingLegacy, h.pendingChunks = nil, nil, nil
	}
}

// reindex makes byPlugin and byOwner from recs.
func (h *Heads) reindex() {
	all := make([]*Record, 0, len(h.recs))
	for _, r := range h.recs {
		all = append(all, r)
	}
	sortRecords(all)
	h.byPlugin, h.byOwner, h.owner = map[string][]*Record{}, map[string]map[string]bool{}, map[string]string{}
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].Plugin == all[i].Plugin {
			j++
		}
		p := all[i].Plugin
		h.byPlugin[p] = slices.Clone(all[i:j])
		h.index(p)
		i = j
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
	h.setHead(h.recs[name])
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
	if r, ok := h.recs[name]; ok {
		delete(h.recs, name)
		h.sorted = nil
		h.byPlugin[r.Plugin] = slices.DeleteFunc(slices.Clone(h.byPlugin[r.Plugin]), func(k *Record) bool { return k.Revision == r.Revision })
		h.index(r.Plugin)
	}
	if h.pending != nil {
		h.pending[name] = nil
	}
}
