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
// per name, in any order.
func order(selected []*Package, orderList []string) (*Result, error) {
	pkgs := append([]*Package(nil), selected...)
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Name < pkgs[j].Name })
	idx := make(map[string]int, len(pkgs))
	for i, p := range pkgs {
		idx[p.Name] = i
	}

	// Collect edges, keeping the strongest kind per ordered pair.
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
	listed := make([]bool, len(pkgs))
	var listedOrder []int
	seen := make(map[string]bool, len(orderList))
	for _, name := range orderList {
		if seen[name] {
			return nil, &OrderError{Plugin: name}
		}
		seen[name] = true
		if n, ok := idx[name]; ok {
			listed[n] = true
			listedOrder = append(listedOrder, n)
		}
	}
	for i := 1; i < len(listedOrder); i++ {
		addEdge(listedOrder[i-1], listedOrder[i], edgeOrder)
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

	// Listed plugins come before all unlisted ones, so none of them may
	// wait for an unlisted plugin.
	for _, n := range listedOrder {
		for _, e := range g.preds[n] {
			if !listed[e.from] {
				return nil, &OrderError{Plugin: pkgs[n].Name, Unlisted: pkgs[e.from].Name, Reason: g.reason(e)}
			}
		}
	}

	// Kahn layering. Unlisted plugins also wait for a barrier that falls
	// once every listed plugin is placed: the same as an edge from each
	// listed plugin, without the quadratic number of edges.
	indeg := make([]int, len(pkgs))
	for n, ps := range g.preds {
		indeg[n] = len(ps)
		if len(listedOrder) > 0 && !listed[n] {
			indeg[n]++
		}
	}
	var ready []int
	for n := range pkgs {
		if indeg[n] == 0 {
			ready = append(ready, n)
		}
	}
	res := &Result{Plugins: make([]*Package, 0, len(pkgs)), After: g.after(listed, listedOrder)}
	placedListed := 0
	for len(ready) > 0 {
		sort.Ints(ready) // node ids are in name order
		wave := make([]*Package, len(ready))
		var next []int
		for i, n := range ready {
			wave[i] = pkgs[n]
			if listed[n] {
				placedListed++
			}
			for _, m := range g.succs[n] {
				if indeg[m]--; indeg[m] == 0 {
					next = append(next, m)
				}
			}
		}
		if len(listedOrder) > 0 && placedListed == len(listedOrder) {
			placedListed = -1 // release the barrier once
			for n := range pkgs {
				if !listed[n] {
					if indeg[n]--; indeg[n] == 0 {
						next = append(next, n)
					}
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
	left := make([]bool, len(g.pkgs))
	for n := range indeg {
		left[n] = indeg[n] > 0
	}
	// Drop nodes stuck only behind others (or the barrier) until every node
	// left waits for another node left: then a walk must close a cycle.
	for changed := true; changed; {
		changed = false
		for n := range left {
			if !left[n] {
				continue
			}
			waits := false
			for _, e := range g.preds[n] {
				if left[e.from] {
					waits = true
					break
				}
			}
			if !waits {
				left[n] = false
				changed = true
			}
		}
	}
	start := -1
	for n := range left {
		if left[n] {
			start = n
			break
		}
	}
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
