package resolve

import (
	"slices"
	"sort"
)

// edgeKind says why one plugin is installed before another. The values are
// ordered by strength: when two declarations order the same pair, the
// strongest is the one reported.
type edgeKind uint8

const (
	edgeRequires edgeKind = iota
	edgeAfter
	edgeBefore
	edgeOrder
)

// edge: from is installed before to.
type edge struct {
	from, to int
	kind     edgeKind
}

type graph struct {
	pkgs  []*Package // sorted by name; indices are node ids
	preds [][]edge   // preds[n]: edges into n, sorted by (from, kind)
	succs [][]int
}

// reason words e the way the plugins declared it; to waits for from.
func (g *graph) reason(e edge) string {
	from, to := g.pkgs[e.from].Name, g.pkgs[e.to].Name
	switch e.kind {
	case edgeRequires:
		return to + " requires " + from
	case edgeAfter:
		return to + " after " + from
	case edgeBefore:
		return from + " before " + to
	default:
		return "order list puts " + from + " before " + to
	}
}

// order lays the selected packages out in waves. selected holds one package
// per name, in any order. Its steps: the graph of requires, after, before and
// the order list; the check that listed plugins wait for no unlisted one; and
// Kahn's layering into waves.
func order(selected []*Package, orderList []string) (*Result, error) {
	pkgs := append([]*Package(nil), selected...)
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Name < pkgs[j].Name })
	g, lst, err := newOrderGraph(pkgs, orderList)
	if err != nil {
		return nil, err
	}
	// Listed plugins come before all unlisted ones, so none of them may
	// wait for an unlisted plugin.
	for _, n := range lst.order {
		for _, e := range g.preds[n] {
			if !lst.listed[e.from] {
				return nil, &OrderError{Plugin: pkgs[n].Name, Unlisted: pkgs[e.from].Name, Reason: g.reason(e)}
			}
		}
	}
	return g.layer(lst)
}

// orderList is the order list's plugins among the selected: listed by node,
// and their nodes in the list's order.
type orderList struct {
	listed []bool
	order  []int
}

// newOrderGraph is the graph of pkgs (sorted by name): an edge per requires,
// after and before between selected plugins, and one between consecutive
// plugins of the order list, keeping the strongest kind per ordered pair. A
// plugin listed twice is an *OrderError.
func newOrderGraph(pkgs []*Package, names []string) (*graph, orderList, error) {
	idx := make(map[string]int, len(pkgs))
	for i, p := range pkgs {
		idx[p.Name] = i
	}
	kinds := make(map[[2]int]edgeKind)
	addEdge := func(from, to int, k edgeKind) {
		key := [2]int{from, to}
		if old, ok := kinds[key]; !ok || k < old {
			kinds[key] = k
		}
	}
	for to, p := range pkgs {
		for _, r := range p.Requires {
			addEdge(idx[r.Name], to, edgeRequires)
		}
		for _, name := range p.After {
			if from, ok := idx[name]; ok {
				addEdge(from, to, edgeAfter)
			}
		}
		for _, name := range p.Before {
			if later, ok := idx[name]; ok {
				addEdge(to, later, edgeBefore)
			}
		}
	}
	lst := orderList{listed: make([]bool, len(pkgs))}
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		if seen[name] {
			return nil, lst, &OrderError{Plugin: name}
		}
		seen[name] = true
		if n, ok := idx[name]; ok {
			lst.listed[n] = true
			lst.order = append(lst.order, n)
		}
	}
	for i := 1; i < len(lst.order); i++ {
		addEdge(lst.order[i-1], lst.order[i], edgeOrder)
	}
	g := &graph{pkgs: pkgs, preds: make([][]edge, len(pkgs)), succs: make([][]int, len(pkgs))}
	for key, k := range kinds {
		e := edge{from: key[0], to: key[1], kind: k}
		g.preds[e.to] = append(g.preds[e.to], e)
		g.succs[e.from] = append(g.succs[e.from], e.to)
	}
	for _, ps := range g.preds {
		sort.Slice(ps, func(i, j int) bool { return ps[i].from < ps[j].from })
	}
	return g, lst, nil
}

// layer lays g out in waves by Kahn's algorithm, each wave in name order.
// Unlisted plugins also wait for a barrier that falls once every listed
// plugin is placed: the same as an edge from each listed plugin, without the
// quadratic number of edges. A cycle is an error naming it.
func (g *graph) layer(lst orderList) (*Result, error) {
	pkgs := g.pkgs
	barrier := len(lst.order) > 0
	indeg := make([]int, len(pkgs))
	var ready []int
	for n, ps := range g.preds {
		indeg[n] = len(ps)
		if barrier && !lst.listed[n] {
			indeg[n]++
		}
		if indeg[n] == 0 {
			ready = append(ready, n)
		}
	}
	res := &Result{Plugins: make([]*Package, 0, len(pkgs)), After: g.after(lst.listed, lst.order)}
	placedListed := 0
	release := func(n int, next *[]int) {
		if indeg[n]--; indeg[n] == 0 {
			*next = append(*next, n)
		}
	}
	for len(ready) > 0 {
		sort.Ints(ready) // node ids are in name order
		wave := make([]*Package, len(ready))
		var next []int
		for i, n := range ready {
			wave[i] = pkgs[n]
			if lst.listed[n] {
				placedListed++
			}
			for _, m := range g.succs[n] {
				release(m, &next)
			}
		}
		if barrier && placedListed == len(lst.order) {
			barrier = false // release the barrier once
			for n := range pkgs {
				if !lst.listed[n] {
					release(n, &next)
				}
			}
		}
		res.Waves = append(res.Waves, wave)
		res.Plugins = append(res.Plugins, wave...)
		ready = next
	}
	if len(res.Plugins) < len(pkgs) {
		return nil, g.cycle(indeg)
	}
	return res, nil
}

// after names what each node waits for: its predecessors and, for an
// unlisted node when there is an order list, every listed node (the barrier).
func (g *graph) after(listed []bool, listedOrder []int) map[string][]string {
	out := make(map[string][]string)
	for n, ps := range g.preds {
		var names []string
		for _, e := range ps {
			names = append(names, g.pkgs[e.from].Name)
		}
		if !listed[n] {
			for _, m := range listedOrder {
				if !slices.Contains(names, g.pkgs[m].Name) {
					names = append(names, g.pkgs[m].Name)
				}
			}
		}
		if len(names) > 0 {
			slices.Sort(names)
			out[g.pkgs[n].Name] = names
		}
	}
	return out
}

// cycle finds a cycle among the nodes Kahn could not place (indeg > 0).
func (g *graph) cycle(indeg []int) *CycleError {
	left := g.stuck(indeg)
	start := slices.Index(left, true)
	// Walk from the smallest name, always to the smallest predecessor left.
	pos := make(map[int]int)
	var path []int
	var via []edge
	for n := start; ; {
		if p, ok := pos[n]; ok {
			path, via = path[p:], via[p:]
			break
		}
		pos[n] = len(path)
		path = append(path, n)
		for _, e := range g.preds[n] {
			if left[e.from] {
				via = append(via, e)
				n = e.from
				break
			}
		}
	}
	// Rotate to start at the smallest name; names in a cycle are distinct.
	minAt := 0
	for i, n := range path {
		if n < path[minAt] {
			minAt = i
		}
	}
	e := &CycleError{}
	for i := range path {
		j := (minAt + i) % len(path)
		e.Chain = append(e.Chain, g.pkgs[path[j]].Name)
		e.Reasons = append(e.Reasons, g.reason(via[j]))
	}
	e.Chain = append(e.Chain, e.Chain[0])
	return e
}

// stuck says which of the nodes Kahn could not place (indeg > 0) wait for
// another of them: nodes stuck only behind others (or the barrier) are
// dropped until every node left waits for another node left, so that a walk
// among them must close a cycle.
func (g *graph) stuck(indeg []int) []bool {
	left := make([]bool, len(g.pkgs))
	for n := range indeg {
		left[n] = indeg[n] > 0
	}
	for changed := true; changed; {
		changed = false
		for n := range left {
			if left[n] && !slices.ContainsFunc(g.preds[n], func(e edge) bool { return left[e.from] }) {
				left[n] = false
				changed = true
			}
		}
	}
	return left
}
