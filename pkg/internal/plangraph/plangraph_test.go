package plangraph_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/internal/plangraph"
)

var update = flag.Bool("update", false, "rewrite the golden graphs under testdata")

// examples are the cluster files whose plan graphs are under golden review.
var examples = []struct {
	name string
	env  map[string]string
}{
	{name: "quickstart"},
	{name: "platform"},
	{name: "baseline", env: map[string]string{"NODE_EXPORTER_SOURCE": "/src/kubeplug/_output/tools/node_exporter"}},
	{name: "machines"},
}

// TestGolden keeps the DOT and SVG of the examples' plans under review.
// Regenerate with: go test ./pkg/internal/plangraph -run TestGolden -update
func TestGolden(t *testing.T) {
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			doc := plan(t, ex.name, ex.env)
			for _, f := range []struct {
				ext string
				b   []byte
			}{{".dot", plangraph.DOT(doc)}, {".svg", plangraph.SVG(doc)}} {
				golden := filepath.Join("testdata", ex.name+f.ext)
				if *update {
					if err := os.WriteFile(golden, f.b, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (regenerate with -update)", err)
				}
				if !bytes.Equal(want, f.b) {
					t.Errorf("%s differs from the plan's graph (regenerate with -update):\n%s", golden, f.b)
				}
			}
		})
	}
}

func plan(t *testing.T, name string, env map[string]string) *engine.PlanDoc {
	t.Helper()
	cfg := &action.Config{ContribDir: "../../../contrib/plugins", Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	cl, l := config.Load(filepath.Join("../../../examples", name, "cluster.yaml"))
	if cl == nil {
		t.Fatal(l)
	}
	doc, l := action.NewPlan(cfg).Run(context.Background(), cl)
	if doc == nil {
		t.Fatal(l)
	}
	return doc
}

// TestSVGShape checks what a reader of the picture relies on: well-formed XML,
// a box per plugin, an edge per dependency, and a box's column is its wave.
func TestSVGShape(t *testing.T) {
	doc := plan(t, "quickstart", nil)
	svg := plangraph.SVG(doc)
	dec := xml.NewDecoder(bytes.NewReader(svg))
	boxes, edges := map[string]string{}, 0
	var group string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		attr := func(n string) string {
			for _, a := range se.Attr {
				if a.Name.Local == n {
					return a.Value
				}
			}
			return ""
		}
		switch {
		case se.Name.Local == "g" && attr("class") == "plugin":
			group = attr("data-plugin")
		case se.Name.Local == "rect" && group != "":
			boxes[group] = attr("x")
			group = ""
		case se.Name.Local == "path" && attr("class") == "edge":
			edges++
		}
	}
	if len(boxes) != len(doc.Plugins) {
		t.Errorf("%d boxes for %d plugins", len(boxes), len(doc.Plugins))
	}
	if want := len(plangraph.Edges(doc)); edges != want || want == 0 {
		t.Errorf("%d edges drawn, the plan has %d (and the quickstart has some)", edges, want)
	}
	for _, p := range doc.Plugins {
		for _, q := range doc.Plugins {
			if (p.Wave == q.Wave) != (boxes[p.Name] == boxes[q.Name]) {
				t.Errorf("%s (wave %d) at x=%s, %s (wave %d) at x=%s", p.Name, p.Wave, boxes[p.Name], q.Name, q.Wave, boxes[q.Name])
			}
		}
	}
}

// TestHostileNames keeps names that mean something in XML or DOT from breaking
// out of the picture or the graph.
func TestHostileNames(t *testing.T) {
	evil := `a"b</text><script>x</script>\`
	doc := &engine.PlanDoc{Cluster: `c"<&`, Plugins: []engine.PlanPlugin{{Name: "base", Enabled: true}, {Name: evil, Version: "1", Wave: 1, After: []string{"base", "not-in-plan"}}}, Waves: [][]string{{"base"}, {evil}}}
	svg := plangraph.SVG(doc)
	if bytes.Contains(svg, []byte("<script>")) {
		t.Errorf("the SVG carries markup from a name:\n%s", svg)
	}
	if err := xml.Unmarshal(svg, new(struct{})); err != nil {
		t.Errorf("the SVG is not well-formed: %v", err)
	}
	dot := string(plangraph.DOT(doc))
	if !strings.Contains(dot, `"a\"b</text><script>x</script>\\"`) || !strings.Contains(dot, `"base" -> "a\"b`) {
		t.Errorf("the DOT does not quote the name:\n%s", dot)
	}
	if strings.Contains(dot, "not-in-plan") {
		t.Errorf("the DOT draws a plugin outside the plan:\n%s", dot)
	}
}

func TestWriteFormat(t *testing.T) {
	dir := t.TempDir()
	doc := &engine.PlanDoc{Cluster: "c", Plugins: []engine.PlanPlugin{{Name: "a"}}, Waves: [][]string{{"a"}}}
	if err := plangraph.Write(filepath.Join(dir, "g.png"), doc); !errors.Is(err, plangraph.ErrFormat) {
		t.Errorf("Write(.png) = %v, want ErrFormat", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "g.png")); err == nil {
		t.Error("Write(.png) wrote a file")
	}
	for _, n := range []string{"g.svg", "g.dot"} {
		if err := plangraph.Write(filepath.Join(dir, n), doc); err != nil {
			t.Errorf("Write(%s): %v", n, err)
		}
	}
}
