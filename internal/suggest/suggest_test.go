package suggest

import (
	"slices"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"list", "list", 0},
		{"lsit", "list", 1},
		{"", "abc", 3},
		{"abc", "", 3},
		{"metrics-server", "metric-server", 1},
		{"kitten", "sitting", 3},
		{"ca", "abc", 3}, // OSA, not full Damerau: no edits of a transposed pair
		{"héllo", "hello", 1},
	} {
		t.Run(tc.a+"/"+tc.b, func(t *testing.T) {
			if got := Distance(tc.a, tc.b); got != tc.want {
				t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
			if got := Distance(tc.b, tc.a); got != tc.want {
				t.Errorf("Distance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
			}
		})
	}
}

func TestClosest(t *testing.T) {
	known := []string{"cert-manager", "dex", "hello", "list", "lint", "metrics-server", "new", "show"}
	for _, tc := range []struct {
		typed string
		want  []string
	}{
		{"lsit", []string{"list"}},
		{"lint", []string{"list"}},         // itself is not suggested; list is one away
		{"lits", []string{"list"}},         // "lint" is two away: too far for four letters
		{"LIST", []string{"list", "lint"}}, // case does not count
		{"lsts", nil},
		{"lixt", []string{"lint", "list"}}, // equals sorted by name
		{"metric-server", []string{"metrics-server"}},
		{"cert-manger", []string{"cert-manager"}},
		{"cert", []string{"cert-manager"}}, // a prefix
		{"de", nil},                        // too short to guess
		{"x", nil},
		{"xyz", nil},
		{"hallo", []string{"hello"}},
		{"nwe", []string{"new"}},
		{"completely-different", nil},
	} {
		t.Run(tc.typed, func(t *testing.T) {
			if got := Closest(tc.typed, known); !slices.Equal(got, tc.want) {
				t.Errorf("Closest(%q) = %q, want %q", tc.typed, got, tc.want)
			}
		})
	}
}

func TestHint(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{"list"}, `; did you mean "list"?`},
		{[]string{"a", "b"}, `; did you mean "a" or "b"?`},
		{[]string{"a", "b", "c", "d"}, `; did you mean "a", "b" or "c"?`},
	} {
		if got := Hint(tc.names); got != tc.want {
			t.Errorf("Hint(%q) = %q, want %q", tc.names, got, tc.want)
		}
	}
}
