package suggest

import (
	"slices"
	"strconv"
	"strings"
)

// Closest returns the names in known closest to typed, nearest first and
// alphabetically among equals, or nothing when none is close enough. A name
// counts as close when its distance to typed is at most MaxDistance(typed), or
// when it starts with typed (at least three characters). typed itself is never
// suggested.
func Closest(typed string, known []string) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	lt := strings.ToLower(typed)
	limit := MaxDistance(typed)
	for _, k := range known {
		if k == typed {
			continue
		}
		lk := strings.ToLower(k)
		d := Distance(lt, lk)
		if d <= limit || (len(lt) >= 3 && strings.HasPrefix(lk, lt)) {
			cs = append(cs, cand{k, d})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.name, b.name)
	})
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		if !slices.Contains(out, c.name) {
			out = append(out, c.name)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// MaxDistance is how many edits a name of typed's length may be away and still
// be suggested: none up to two characters (every short name is one edit from
// many), 1 up to five, 2 up to eight, 3 beyond.
func MaxDistance(typed string) int {
	switch n := len([]rune(typed)); {
	case n <= 2:
		return 0
	case n <= 5:
		return 1
	case n <= 8:
		return 2
	default:
		return 3
	}
}

// Hint formats names as `; did you mean "a"?` or `; did you mean "a" or "b"?`
// (at most three), to append to an error message; empty when names is empty.
func Hint(names []string) string {
	if len(names) == 0 {
		return ""
	}
	if len(names) > 3 {
		names = names[:3]
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	s := q[len(q)-1]
	if len(q) > 1 {
		s = strings.Join(q[:len(q)-1], ", ") + " or " + s
	}
	return "; did you mean " + s + "?"
}

// Distance is the optimal string alignment distance between a and b, counted
// in runes: insertions, deletions, substitutions and transpositions of two
// adjacent runes each cost one.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j] is the distance between ra[:i] and rb[:j]; three rows suffice.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
