package fuzzseed

import (
	"strings"
	"testing"
)

// YAML returns hostile YAML documents.
func YAML() []string {
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range strings.Split("bcdefghi", "") {
		bomb += n + ": &" + n + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = n
	}
	return []string{
		bomb,
		"a: &a {b: *a}\n",
		"a: *undefined\n",
		"count: 99999999999999999999999\n",
		"count: -9223372036854775809\n",
		"count: 1e400\n",
		"count: .nan\n",
		"a:\n\tb: 1\n",
		"a: 1\nb:\n  - {x: 1, y: 2\nc: 3\n",
		"a: \"unclosed\n",
		"a: 1\na: 2\n",
		"<<: {a: 1}\n",
		"a: 1\n---\nb: 2\n",
		"a: \"\\u0000\\x1b[31m\"\n",
		"? [complex, key]\n: value\n",
		"!!binary a: b\n",
		"a: !!int not-a-number\n",
		"\xff\xfe\x00",
		"",
	}
}

// Add adds each of seeds to f.
func Add(f *testing.F, seeds []string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
}
