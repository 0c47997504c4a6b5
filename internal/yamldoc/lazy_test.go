package yamldoc

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/kubeplug/kubeplug/pkg/diag"
)

// eager is what Parse and ParseAll made before positions were indexed
// lazily: every document converted noting positions as it goes.
func eager(t *testing.T, data []byte) []*Doc {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*Doc
	for {
		var root yaml.Node
		if err := dec.Decode(&root); errors.Is(err, io.EOF) {
			return docs
		} else if err != nil {
			t.Fatal(err)
		}
		n := &root
		if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
			n = n.Content[0]
		}
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
			continue
		}
		d := &Doc{File: "f.yaml", pos: map[string]position{}}
		var l diag.List
		d.Value = d.convert(n, "", 0, 0, &l)
		docs = append(docs, d)
	}
}

// TestLazyPositionsAreTheEagerOnes: a document converted without positions
// has the value, and when asked the positions, that converting it noting
// them gives; one with a problem is reported as before.
func TestLazyPositionsAreTheEagerOnes(t *testing.T) {
	for _, text := range []string{
		"a: 1\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: {app.kubernetes.io/name: x, \"a/b~c\": y}\ndata:\n  k: |\n    line\n  n: 12\n  f: 1.5\n  b: true\n  z: null\n",
		"list:\n  - a\n  - {b: [1, 2, {c: d}]}\n  -\n  - - nested\n",
		"base: &b {x: 1, y: [1, 2]}\nuse: *b\nmore: [*b, *b]\nscalar: &s text\nagain: *s\n",
		"---\na: 1\n---\n---\nb: [x]\n---\n- 1\n- two\n",
		"'quoted key': \"v\"\n? complex\n: value\n",
		"{}\n",
		"[]\n",
	} {
		want := eager(t, []byte(text))
		got, l := ParseAll("f.yaml", []byte(text))
		if l.HasFatal() || len(got) != len(want) {
			t.Fatalf("%q: %d documents (%v), want %d", text, len(got), l, len(want))
		}
		for i := range got {
			if got[i].root == nil {
				t.Errorf("%q document %d: converted noting positions, want them left for later", text, i)
			}
			if !reflect.DeepEqual(got[i].Value, want[i].Value) {
				t.Errorf("%q document %d: value %#v, want %#v", text, i, got[i].Value, want[i].Value)
			}
			if pos := got[i].positions(); !reflect.DeepEqual(pos, want[i].pos) {
				t.Errorf("%q document %d: positions\n%v\nwant\n%v", text, i, pos, want[i].pos)
			}
		}
		if len(want) == 1 {
			d, l := Parse("f.yaml", []byte(text))
			if l.HasFatal() || !reflect.DeepEqual(d.Value, want[0].Value) || !reflect.DeepEqual(d.positions(), want[0].pos) {
				t.Errorf("%q: Parse differs from the eager conversion (%v)", text, l)
			}
		}
	}
	for _, tc := range []struct{ text, want string }{
		{"a: 1\nb: 2\na: 3\n", `f.yaml:3:1: a: duplicate key "a", first set on line 1`},
		{"a:\n  - x\n  - {1: y}\n", "f.yaml:3:6: a[1]: expected a string key, found int \"1\""},
		{"base: &b {x: 1}\nm:\n  <<: *b\n", "f.yaml:3:3: m: merge keys (<<) are not supported"},
	} {
		_, l := ParseAll("f.yaml", []byte(tc.text))
		if got := l.String(); len(got) < len(tc.want) || got[:len(tc.want)] != tc.want {
			t.Errorf("%q: %s, want %s...", tc.text, got, tc.want)
		}
	}
}

// TestLazyPositionsConcurrently: a document read from many goroutines at
// once (a plugin's manifest, checked by stages running in parallel) indexes
// its positions once, for all of them (go test -race).
func TestLazyPositionsConcurrently(t *testing.T) {
	d, l := Parse("f.yaml", []byte("a:\n  b: [x, y]\n"))
	if l.HasFatal() {
		t.Fatal(l)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if line, col := d.Pos("/a/b/1"); line != 2 || col != 10 {
				t.Errorf("Pos = %d:%d, want 2:10", line, col)
			}
			if got := FieldPath(d, "/a/b/1"); got != "a.b[1]" {
				t.Errorf("FieldPath = %q", got)
			}
		})
	}
	wg.Wait()
}
