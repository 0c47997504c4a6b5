package yamldoc

import (
	"strings"
	"testing"
	"time"
)

// TestSyntaxErrorsAreLocated: a YAML syntax error names the line and column of
// the mistake, not the line before it at column 1.
func TestSyntaxErrorsAreLocated(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"unclosed flow mapping", "a: 1\nb:\n  - {x: 1, y: 2\nc: 3\n", "f.yaml:3:5: invalid YAML: the flow mapping {...} that starts here is not closed"},
		{"unclosed flow mapping, one line", "{a: 1", "f.yaml:1:1: invalid YAML: the flow mapping"},
		{"unclosed flow list", "a: 1\nb: [1, 2\nc: 3\n", "f.yaml:2:4: invalid YAML: the flow list"},
		{"unclosed quote", "a: 1\nb: \"abc\nc: 2\n", "f.yaml:2:4: invalid YAML: the quoted string"},
		{"key indented less", "a: 1\nb:\n  c: 1\n d: 2\n", "f.yaml:4:2: invalid YAML: did not find expected key"},
		{"list item among keys", "a:\n  b: 1\n  - c\n", "f.yaml:3:3: invalid YAML: did not find expected key"},
		{"key among list items", "a: 1\nb:\n  - x\n  y: 2\n", "f.yaml:4:3: invalid YAML: did not find expected '-' indicator"},
		{"two colons", "a: 1\nb: c: d\n", "f.yaml:2:5: invalid YAML: mapping values are not allowed"},
		{"unknown anchor", "a: 1\nb: *nope\n", "f.yaml:2:4: invalid YAML: unknown anchor 'nope' referenced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, l := Parse("f.yaml", []byte(tc.text))
			if got := l.String(); !strings.HasPrefix(got, tc.want) {
				t.Errorf("got  %s\nwant %s...", got, tc.want)
			}
		})
	}
}

// TestAliasBombIsRefusedAtOnce: a document that expands to billions of values
// through aliases is refused in milliseconds, at the alias that crosses the limit.
func TestAliasBombIsRefusedAtOnce(t *testing.T) {
	var b strings.Builder
	b.WriteString("a: &a [x, x, x, x, x, x, x, x, x, x]\n")
	prev := "a"
	for _, name := range strings.Split("bcdefghijklmnop", "") {
		b.WriteString(name + ": &" + name + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n")
		prev = name
	}
	start := time.Now()
	doc, l := Parse("bomb.yaml", []byte(b.String()))
	if took := time.Since(start); took > 200*time.Millisecond {
		t.Errorf("refusing the bomb took %s", took)
	}
	if doc != nil || !strings.Contains(l.String(), "bomb.yaml:6:") || !strings.Contains(l.String(), "through aliases") {
		t.Errorf("diagnostics: %s", l)
	}
	// Aliases that expand to little are fine.
	if doc, l := Parse("ok.yaml", []byte("a: &a {x: 1}\nb: *a\nc: [*a, *a]\n")); doc == nil {
		t.Errorf("diagnostics: %s", l)
	}
}
