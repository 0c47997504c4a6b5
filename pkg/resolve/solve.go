package resolve

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/internal/suggest"
)

// Resolve picks one version of every enabled plugin and of everything those
// require, transitively, and orders the result into waves.
//
// For each name it picks the highest version that satisfies every constraint
// placed on the name — by the request and by every selected package that
// requires it — and the request's Kubernetes version, and that conflicts with
// no other selected plugin, trying the version Request.Prefer names for it
// first (a lock file's pin); when a choice leads to a dead end it backtracks to
// the choice responsible and tries that name's next lower version. A name is
// decided only after every name that may require it, so its constraints are
// all known when its version is picked; ties are broken by name. The result
// therefore depends only on the catalog's contents and the request, not on
// the order either lists things in.
//
// Errors are the typed errors of this package (see the sentinel errors); if
// ctx is cancelled first, the error wraps ctx.Err(). Resolve only reads cat;
// cat must not change during the call.
func Resolve(ctx context.Context, cat Catalog, req Request) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("resolving plugins: %w", err)
	}
	s := &solver{
		ctx:    ctx,
		cat:    cat,
		kube:   req.KubernetesVersion,
		prov:   req.Provider,
		prefer: req.Prefer,
		names:  make(map[string]*nameState),
		feas:   make(map[*Package]error),
	}
	enabled := make([]Requirement, len(req.Enabled))
	copy(enabled, req.Enabled)
	// Stable: a name enabled twice keeps its constraints in the given order,
	// which only shows in error messages.
	sort.SliceStable(enabled, func(i, j int) bool { return enabled[i].Name < enabled[j].Name })
	var roots []*nameState
	for _, r := range enabled {
		st := s.state(r.Name)
		if len(roots) == 0 || roots[len(roots)-1] != st {
			roots = append(roots, st)
		}
	}
	s.rank(roots)
	for _, r := range enabled {
		st := s.state(r.Name)
		s.addWant(st, want{c: r.Constraint})
		s.enqueue(st)
	}
	// A request that cannot be met whatever the search does fails here with
	// the plain reason, before any search.
	for _, st := range roots {
		if !s.viable(st) {
			return nil, s.explain(st)
		}
	}
	if _, err := s.solve(); err != nil {
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
			return nil, fmt.Errorf("resolving plugins: %w", err)
		}
		return nil, err
	}
	selected := make([]*Package, len(s.decided))
	for i, st := range s.decided {
		selected[i] = st.sel
	}
	return order(selected, req.Order)
}

// want is one constraint on a name; by is nil for the request.
type want struct {
	by *Package
	c  *semver.Constraints
}

// nameState is everything the search knows about one plugin name.
type nameState struct {
	name     string
	versions []*Package // highest first
	// unsupported[i]: versions[i] refuses the cluster's Kubernetes version.
	unsupported []bool
	// excl[i] is -1 while versions[i] satisfies every want, else the index in
	// wants of the first want it fails. Kept up to date as wants come and go
	// so that finding the candidates never rechecks old constraints.
	excl  []int32
	wants []want
	// sel is the chosen version, nil while undecided.
	sel *Package
	// conflictedBy lists selected packages declaring a conflict with name.
	conflictedBy []*Package
	// queued: something wants the name, so it must be decided.
	queued bool
	// depth is the index in solver.decided while selected, else -1.
	depth int
	// heapIdx is the index in solver.pending while queued and undecided,
	// else -1.
	heapIdx int
	// prefer is the index in versions of the version to try first
	// (Request.Prefer), else -1.
	prefer int
	// rank orders decisions: a name is decided after every name that may
	// require it (see solver.rank).
	rank int

	// Scratch space for solver.rank.
	deps   []*nameState
	indeg  int
	seen   bool
	ranked bool
}

type solver struct {
	ctx    context.Context
	cat    Catalog
	kube   *semver.Version
	prov   string
	prefer map[string]*semver.Version
	names  map[string]*nameState
	// pending holds the queued, undecided names, lowest rank on top.
	pending pendingHeap
	// decided holds the selected names in decision order.
	decided []*nameState
	// feas memoises feasible: a package whose requirements cannot be met by
	// any versions at all, whatever else is selected, is never tried again.
	feas map[*Package]error
}

func (s *solver) state(name string) *nameState {
	if st := s.names[name]; st != nil {
		return st
	}
	vs := s.cat.Versions(name)
	if !sort.SliceIsSorted(vs, func(i, j int) bool { return vs[i].Version.GreaterThan(vs[j].Version) }) {
		// The Catalog contract says highest first; a catalog that breaks it
		// must not change which version wins.
		vs = append([]*Package(nil), vs...)
		sort.SliceStable(vs, func(i, j int) bool { return vs[i].Version.GreaterThan(vs[j].Version) })
	}
	st := &nameState{
		name:        name,
		versions:    vs,
		unsupported: make([]bool, len(vs)),
		excl:        make([]int32, len(vs)),
		depth:       -1,
		heapIdx:     -1,
		prefer:      -1,
	}
	if pv := s.prefer[name]; pv != nil {
		st.prefer = slices.IndexFunc(vs, func(p *Package) bool { return p.Version.Equal(pv) })
	}
	for i, p := range vs {
		st.excl[i] = -1
		st.unsupported[i] = s.kube != nil && p.KubernetesVersion != nil && !p.KubernetesVersion.Check(s.kube) || !s.runsOn(p)
	}
	s.names[name] = st
	return st
}

// runsOn says whether p runs on the request's provider.
func (s *solver) runsOn(p *Package) bool {
	return s.prov == "" || len(p.Providers) == 0 || slices.Contains(p.Providers, s.prov)
}

// at is the index in st.versions of the k-th version to try: the preferred
// one first, then the others highest first.
func (st *nameState) at(k int) int {
	switch {
	case st.prefer < 0 || k > st.prefer:
		return k
	case k == 0:
		return st.prefer
	default:
		return k - 1
	}
}

func (s *solver) enqueue(st *nameState) {
	if !st.queued {
		st.queued = true
		heap.Push(&s.pending, st)
	}
}

func (s *solver) addWant(st *nameState, w want) {
	k := int32(len(st.wants))
	st.wants = append(st.wants, w)
	if w.c == nil {
		return
	}
	for i, p := range st.versions {
		if st.excl[i] < 0 && !w.c.Check(p.Version) {
			st.excl[i] = k
		}
	}
}

func (s *solver) removeWant(st *nameState) {
	k := int32(len(st.wants) - 1)
	for i := range st.excl {
		if st.excl[i] == k {
			st.excl[i] = -1
		}
	}
	st.wants = st.wants[:k]
}

// feasible reports why p can never be selected, or nil. It looks only at p
// and what it requires, transitively, not at the rest of the selection, so
// the answer holds for the whole call and is memoised. While p is being
// examined it counts as feasible: that can only miss a dead end (the search
// then finds it), never reject a package that could be selected.
func (s *solver) feasible(p *Package) error {
	if err, ok := s.feas[p]; ok {
		return err
	}
	s.feas[p] = nil
	var err error
	for _, r := range p.Requires {
		st := s.state(r.Name)
		ok := false
		for i, q := range st.versions {
			if !st.unsupported[i] && (r.Constraint == nil || r.Constraint.Check(q.Version)) && s.feasible(q) == nil {
				ok = true
				break
			}
		}
		if !ok {
			err = s.explainWants(st, []want{{by: p, c: r.Constraint}})
			break
		}
	}
	s.feas[p] = err
	return err
}

// viable reports whether some version of st is still a candidate.
func (s *solver) viable(st *nameState) bool {
	for i, p := range st.versions {
		if st.excl[i] < 0 && !st.unsupported[i] && s.feasible(p) == nil {
			return true
		}
	}
	return false
}

// solve decides every pending name and returns nil once all queued names
// have a version. On failure it returns the error that explains it and the
// culprits: the depths of the earlier decisions that contributed to it. A
// decision that is not a culprit cannot fix the failure by choosing
// differently, so it passes the failure straight up (conflict-directed
// backjumping); this is what keeps a dead end from being retried once for
// every combination of unrelated choices above it. On failure the solver's
// state is as it was before the call.
func (s *solver) solve() (culprits, error) {
	if len(s.pending) == 0 {
		return nil, nil
	}
	if err := s.ctx.Err(); err != nil {
		return nil, err // no culprits: unwinds straight to the top
	}
	st := heap.Pop(&s.pending).(*nameState)
	defer func() {
		if st.sel == nil {
			heap.Push(&s.pending, st)
		}
	}()
	i := len(s.decided)
	var conf culprits
	// st has to be decided at all only because of who requires it.
	s.addOrigins(&conf, st)
	if len(st.conflictedBy) > 0 {
		by := st.conflictedBy[0]
		conf.add(s.names[by.Name].depth)
		return conf, s.conflictError(by, st, nil)
	}
	var first error
	for k := range st.versions {
		vi := st.at(k)
		v := st.versions[vi]
		if st.excl[vi] >= 0 || st.unsupported[vi] {
			continue
		}
		if err := s.feasible(v); err != nil {
			first = firstOf(first, err)
			continue
		}
		if c, err := s.conflicts(st, v); err != nil {
			first = firstOf(first, err)
			conf.union(c)
			continue
		}
		if c, err := s.choose(st, v); err != nil {
			first = firstOf(first, err)
			conf.union(c)
			continue
		}
		sub, err := s.solve()
		if err == nil {
			return nil, nil
		}
		s.unchoose(st, v, len(v.Requires), len(v.Conflicts))
		if !sub.has(i) {
			return sub, err
		}
		first = firstOf(first, err)
		sub.del(i)
		conf.union(sub)
	}
	if first == nil {
		first = s.explain(st)
	}
	return conf, first
}

func firstOf(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// conflicts checks v's declared conflicts against the names that are
// selected or required.
func (s *solver) conflicts(st *nameState, v *Package) (culprits, error) {
	for _, name := range v.Conflicts {
		o := s.names[name]
		if o == nil || o == st {
			continue
		}
		var c culprits
		switch {
		case o.sel != nil:
			c.add(o.depth)
		case o.queued:
			s.addOrigins(&c, o)
		default:
			continue
		}
		return c, s.conflictError(v, o, st)
	}
	return nil, nil
}

// choose selects v for st and records what v asks of others. If that
// leaves a required name without any candidate it undoes everything and
// returns why, with the culprits other than st itself.
func (s *solver) choose(st *nameState, v *Package) (culprits, error) {
	st.sel = v
	st.depth = len(s.decided)
	s.decided = append(s.decided, st)
	for _, name := range v.Conflicts {
		o := s.state(name)
		o.conflictedBy = append(o.conflictedBy, v)
	}
	for n, r := range v.Requires {
		rs := s.state(r.Name)
		s.addWant(rs, want{by: v, c: r.Constraint})
		s.enqueue(rs)
		var err error
		var c culprits
		switch {
		case len(rs.conflictedBy) > 0:
			by := rs.conflictedBy[0]
			err = s.conflictError(by, rs, nil)
			c.add(s.names[by.Name].depth)
		case rs.sel != nil:
			if r.Constraint != nil && !r.Constraint.Check(rs.sel.Version) {
				err = s.explain(rs)
				c.add(rs.depth)
				s.addOrigins(&c, rs)
			}
		case !s.viable(rs):
			err = s.explain(rs)
			s.addOrigins(&c, rs)
		}
		if err != nil {
			c.del(st.depth)
			s.unchoose(st, v, n+1, len(v.Conflicts))
			return c, err
		}
	}
	return nil, nil
}

func (s *solver) addOrigins(c *culprits, st *nameState) {
	for _, w := range st.wants {
		if w.by != nil {
			c.add(s.names[w.by.Name].depth)
		}
	}
}

// unchoose undoes choose for the first nReq requirements and nConf
// conflicts of v, in reverse.
func (s *solver) unchoose(st *nameState, v *Package, nReq, nConf int) {
	for n := nReq - 1; n >= 0; n-- {
		rs := s.names[v.Requires[n].Name]
		s.removeWant(rs)
		if len(rs.wants) == 0 && rs.queued {
			// Only v wanted it, so v queued it and nothing decided it since.
			heap.Remove(&s.pending, rs.heapIdx)
			rs.queued = false
		}
	}
	for n := nConf - 1; n >= 0; n-- {
		o := s.names[v.Conflicts[n]]
		o.conflictedBy = o.conflictedBy[:len(o.conflictedBy)-1]
	}
	st.sel = nil
	st.depth = -1
	s.decided = s.decided[:len(s.decided)-1]
}

// rank numbers every name reachable from roots through the requirements of
// any of their versions so that a name ranks after every name that may
// require it (Kahn's algorithm, ties and cycles broken by name). Deciding
// names in rank order means that when a name is decided, every constraint
// it will get is already known, so the search rarely has to come back and
// lower a version it picked too early.
func (s *solver) rank(roots []*nameState) {
	nodes := s.reachable(roots)
	byName := append([]*nameState(nil), nodes...)
	sort.Slice(byName, func(i, j int) bool { return byName[i].name < byName[j].name })
	var ready nameHeap
	for _, st := range byName {
		if st.indeg == 0 {
			ready = append(ready, st)
		}
	}
	next, rank := 0, 0
	for rank < len(nodes) {
		if len(ready) == 0 {
			// A cycle: start it at its smallest unranked name.
			for byName[next].ranked {
				next++
			}
			st := byName[next]
			st.indeg = 0
			heap.Push(&ready, st)
		}
		st := heap.Pop(&ready).(*nameState)
		if st.ranked {
			continue
		}
		st.ranked = true
		st.rank = rank
		rank++
		for _, d := range st.deps {
			if d.indeg--; d.indeg == 0 && !d.ranked {
				heap.Push(&ready, d)
			}
		}
		st.deps = nil
	}
}

// reachable are the names reachable from roots through the requirements of
// any of their versions, roots first; each records the names it may require
// (deps) and how many names may require it (indeg).
func (s *solver) reachable(roots []*nameState) []*nameState {
	nodes := append([]*nameState(nil), roots...)
	for _, st := range roots {
		st.seen = true
	}
	for i := 0; i < len(nodes); i++ {
		st := nodes[i]
		for _, p := range st.versions {
			for _, r := range p.Requires {
				rs := s.state(r.Name)
				if !rs.seen {
					rs.seen = true
					nodes = append(nodes, rs)
				}
				if n := len(st.deps); n == 0 || !containsState(st.deps, rs) {
					st.deps = append(st.deps, rs)
					rs.indeg++
				}
			}
		}
	}
	return nodes
}

func containsState(sts []*nameState, st *nameState) bool {
	for _, x := range sts {
		if x == st {
			return true
		}
	}
	return false
}

// nameHeap is a min-heap of names.
type nameHeap []*nameState

func (h nameHeap) Len() int           { return len(h) }
func (h nameHeap) Less(i, j int) bool { return h[i].name < h[j].name }
func (h nameHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *nameHeap) Push(x any)        { *h = append(*h, x.(*nameState)) }
func (h *nameHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// pendingHeap is a min-heap of names by rank that tracks positions, so that
// undoing a choice can take out the names it queued.
type pendingHeap []*nameState

func (h pendingHeap) Len() int           { return len(h) }
func (h pendingHeap) Less(i, j int) bool { return h[i].rank < h[j].rank }
func (h pendingHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}
func (h *pendingHeap) Push(x any) {
	st := x.(*nameState)
	st.heapIdx = len(*h)
	*h = append(*h, st)
}
func (h *pendingHeap) Pop() any {
	old := *h
	st := old[len(old)-1]
	st.heapIdx = -1
	*h = old[:len(old)-1]
	return st
}

// explain says why st has no candidate left, given all wants on it.
func (s *solver) explain(st *nameState) error { return s.explainWants(st, st.wants) }

// explainWants says why no version of st satisfies ws together with the
// Kubernetes version and its own requirements.
func (s *solver) explainWants(st *nameState, ws []want) error {
	pub := make([]Want, len(ws))
	for i, w := range ws {
		pub[i] = Want{By: RequestedBy, Name: st.name, Constraint: w.c}
		if w.by != nil {
			pub[i].By = w.by.String()
			pub[i].Package = w.by
		}
	}
	if len(st.versions) == 0 {
		e := &MissingError{Name: st.name, Wants: pub}
		if nl, ok := s.cat.(NameLister); ok {
			e.Suggestions = suggest.Closest(st.name, nl.Names())
		}
		return e
	}
	sat := satisfying(st, ws)
	unsup, byProvider := s.unsupported(st)
	someSupported, someFeasible, dead := s.feasibility(st, sat)
	if someSupported && !someFeasible {
		// Only dead ends left: the highest one's reason.
		return dead
	}
	if len(sat) > 0 && !someSupported && byProvider {
		e := &ProviderError{Name: st.name, Provider: s.prov, Unsupported: unsup}
		for _, w := range pub {
			if !slices.Contains(e.RequiredBy, w.By) {
				e.RequiredBy = append(e.RequiredBy, w.By)
			}
		}
		return e
	}
	if len(sat) == len(st.versions) && !someSupported {
		return &KubernetesVersionError{Name: st.name, Kubernetes: s.kube, Unsupported: unsup}
	}
	avail := make([]*semver.Version, len(st.versions))
	for i, p := range st.versions {
		avail[i] = p.Version
	}
	return &UnsatisfiableError{Name: st.name, Wants: pub, Available: avail, Kubernetes: s.kube, Unsupported: unsup}
}

// satisfying is the indexes of st's versions that every want admits.
func satisfying(st *nameState, ws []want) []int {
	var sat []int
	for i, p := range st.versions {
		if !slices.ContainsFunc(ws, func(w want) bool { return w.c != nil && !w.c.Check(p.Version) }) {
			sat = append(sat, i)
		}
	}
	return sat
}

// unsupported lists st's versions refused for the Kubernetes version or the
// provider, and says whether every one was refused for its providers.
func (s *solver) unsupported(st *nameState) (unsup []Unsupported, byProvider bool) {
	byProvider = true
	for i, p := range st.versions {
		if !st.unsupported[i] {
			continue
		}
		u := Unsupported{Version: p.Version, Needs: p.KubernetesVersion}
		if !s.runsOn(p) {
			u.Providers = p.Providers
		} else {
			byProvider = false
		}
		unsup = append(unsup, u)
	}
	return unsup, byProvider
}

// feasibility says, of the versions sat indexes, whether one is supported,
// whether one of those is feasible, and the first dead end's reason.
func (s *solver) feasibility(st *nameState, sat []int) (someSupported, someFeasible bool, dead error) {
	for _, i := range sat {
		if st.unsupported[i] {
			continue
		}
		someSupported = true
		if err := s.feasible(st.versions[i]); err == nil {
			someFeasible = true
		} else if dead == nil {
			dead = err
		}
	}
	return someSupported, someFeasible, dead
}

// conflictError describes decl, which declares a conflict with o. declSt is
// decl's own state when decl is not selected yet (a candidate).
func (s *solver) conflictError(decl *Package, o *nameState, declSt *nameState) error {
	if declSt == nil {
		declSt = s.names[decl.Name]
	}
	e := &ConflictError{
		Plugin:           decl.Name,
		PluginVersion:    decl.Version,
		PluginRequiredBy: origins(declSt),
		Other:            o.name,
		OtherRequiredBy:  origins(o),
	}
	if o.sel != nil {
		e.OtherVersion = o.sel.Version
	}
	return e
}

func origins(st *nameState) []string {
	out := make([]string, 0, len(st.wants))
	for _, w := range st.wants {
		if w.by == nil {
			out = append(out, RequestedBy)
		} else {
			out = append(out, w.by.String())
		}
	}
	return out
}

// culprits is a set of decision depths.
type culprits []uint64

func (c *culprits) add(d int) {
	for len(*c) <= d/64 {
		*c = append(*c, 0)
	}
	(*c)[d/64] |= 1 << (d % 64)
}

func (c culprits) has(d int) bool { return d/64 < len(c) && c[d/64]&(1<<(d%64)) != 0 }

func (c culprits) del(d int) {
	if d/64 < len(c) {
		c[d/64] &^= 1 << (d % 64)
	}
}

func (c *culprits) union(o culprits) {
	for len(*c) < len(o) {
		*c = append(*c, 0)
	}
	for i, w := range o {
		(*c)[i] |= w
	}
}
