package hookspec

import (
	"fmt"
	"slices"
	"strings"
)

// CycleError is a loop in the hooks' before and requires: no order can satisfy it.
type CycleError struct {
	// Chain is the loop's hook IDs, the first repeated at the end, each waiting for
	// the next (it requires it, or the next names it in before): a -> b -> a.
	Chain []string
}

func (e *CycleError) Error() string {
	return "hooks order each other in a cycle: " + strings.Join(e.Chain, " -> ")
}

// Schedule returns the phase's hooks, given in manifest order, so that every hook comes
// after the hooks it requires and the hooks that name it in before. Among hooks free
// to go, the one first in the manifest goes first, so a manifest without before or
// requires runs as written. deps[i] holds the indexes (into the result) of the hooks
// that must end before the i-th starts. A before naming a hook that is not in the
// phase only orders against nothing; a requires naming one is for the caller to
// report, as is the hook in other that names it.
// other maps the IDs of the machine's hooks in other phases to their phase.
func Schedule(hooks []Hook, other map[string]string) (sorted []Hook, deps [][]int, err error) {
	after, err := hookEdges(hooks, other)
	if err != nil {
		return nil, nil, err
	}
	if chain := findCycle(hooks, after); chain != nil {
		return nil, nil, &CycleError{Chain: chain}
	}
	sorted, deps = kahn(hooks, after)
	return sorted, deps, nil
}

// hookEdges says for each hook the hooks that must end before it, in the
// manifest's indexes, sorted: those it requires, and those that name it in
// before. A requires or before naming a hook of another phase is an error.
func hookEdges(hooks []Hook, other map[string]string) ([][]int, error) {
	index := make(map[string]int, len(hooks))
	for i := range hooks {
		index[hooks[i].ID()] = i
	}
	after := make([][]int, len(hooks))
	add := func(first, then int) {
		if !slices.Contains(after[then], first) {
			after[then] = append(after[then], first)
		}
	}
	for i := range hooks {
		h := &hooks[i]
		for _, r := range h.Requires {
			if j, ok := index[h.Ref(r)]; ok {
				add(j, i)
			} else if at, ok := other[h.Ref(r)]; ok {
				return nil, fmt.Errorf("hook %s requires %s, which runs in phase %s", h.ID(), h.Ref(r), at)
			}
		}
		for _, b := range h.Before {
			if j, ok := index[h.Ref(b)]; ok {
				add(i, j)
			} else if at, ok := other[h.Ref(b)]; ok {
				return nil, fmt.Errorf("hook %s is to run before %s, which runs in phase %s", h.ID(), h.Ref(b), at)
			}
		}
	}
	for i := range after {
		slices.Sort(after[i])
	}
	return after, nil
}

// kahn orders the hooks, whose edges after has no cycle, by Kahn's
// algorithm, always taking the earliest ready hook in manifest order; deps[i]
// holds the indexes (into sorted) of the hooks that must end before the i-th.
func kahn(hooks []Hook, after [][]int) (sorted []Hook, deps [][]int) {
	pending := make([]int, len(hooks))
	then := make([][]int, len(hooks))
	for i, a := range after {
		pending[i] = len(a)
		for _, j := range a {
			then[j] = append(then[j], i)
		}
	}
	pos := make([]int, len(hooks)) // manifest index -> result index
	placed := make([]bool, len(hooks))
	for n := range hooks {
		next := -1
		for i := range hooks {
			if !placed[i] && pending[i] == 0 {
				next = i
				break
			}
		}
		placed[next] = true
		pos[next] = n
		sorted = append(sorted, hooks[next])
		for _, k := range then[next] {
			pending[k]--
		}
	}
	deps = make([][]int, len(hooks))
	for i, a := range after {
		for _, j := range a {
			deps[pos[i]] = append(deps[pos[i]], pos[j])
		}
		slices.Sort(deps[pos[i]])
	}
	return sorted, deps
}

// findCycle returns a loop in the graph as hook IDs, or nil. It searches from hooks in
// manifest order and follows edges in index order, so the same manifest always
// names the same loop.
func findCycle(hooks []Hook, after [][]int) []string {
	const (
		unseen = iota
		onPath
		finished
	)
	mark := make([]int, len(hooks))
	var path []int
	var visit func(i int) []string
	visit = func(i int) []string {
		mark[i] = onPath
		path = append(path, i)
		for _, j := range after[i] {
			switch mark[j] {
			case onPath:
				var chain []string
				for _, k := range path[slices.Index(path, j):] {
					chain = append(chain, hooks[k].ID())
				}
				return append(chain, hooks[j].ID())
			case unseen:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		mark[i] = finished
		return nil
	}
	for i := range hooks {
		if mark[i] == unseen {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// Order sorts one phase's hooks, given in manifest order, the way the node agent
// does: after
// the hooks each requires and those naming it in before, ties kept in manifest
// order. Names of hooks not in the list are ignored. A loop is a *CycleError.
func Order(hooks []Hook) ([]Hook, error) {
	sorted, _, err := Schedule(hooks, nil)
	return sorted, err
}
