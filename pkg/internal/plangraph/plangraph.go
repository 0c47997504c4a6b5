package plangraph

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/engine"
)

// ErrFormat is returned by Write for a file whose extension names no format.
var ErrFormat = errors.New("unknown graph format")

// Edge is one dependency of the plan: To waits for From.
type Edge struct {
	From, To string
}

// Edges lists the plan's dependencies in plan order of the waiting plugin, then
// of the plugin waited for. A name in After that is not a plugin of the plan is
// left out: the graph draws only what the plan runs.
func Edges(d *engine.PlanDoc) []Edge {
	in := map[string]bool{}
	for _, p := range d.Plugins {
		in[p.Name] = true
	}
	var out []Edge
	for _, p := range d.Plugins {
		for _, a := range p.After {
			if in[a] {
				out = append(out, Edge{From: a, To: p.Name})
			}
		}
	}
	return out
}

// DOT writes the plan as a Graphviz digraph: a cluster subgraph per wave (so
// Graphviz keeps them in columns too) and an edge per dependency, from the
// plugin waited for to the plugin that waits.
func DOT(d *engine.PlanDoc) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "digraph %s {\n", dotID("plan "+d.Cluster))
	fmt.Fprintf(&b, "  label=%s;\n", dotID(fmt.Sprintf("cluster %s, Kubernetes %s", d.Cluster, d.KubernetesVersion)))
	b.WriteString("  rankdir=LR;\n  node [shape=box, style=rounded];\n")
	for w, names := range d.Waves {
		fmt.Fprintf(&b, "  subgraph %s {\n    label=%s;\n", dotID(fmt.Sprintf("cluster_wave%d", w)), dotID(fmt.Sprintf("wave %d", w)))
		for _, n := range names {
			p := plugin(d, n)
			fmt.Fprintf(&b, "    %s [label=%s];\n", dotID(n), dotID(n+"\n"+p.Version))
		}
		b.WriteString("  }\n")
	}
	for _, e := range Edges(d) {
		fmt.Fprintf(&b, "  %s -> %s;\n", dotID(e.From), dotID(e.To))
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// dotID quotes s as a DOT identifier: a double-quoted string, with quotes and
// backslashes escaped and a newline as DOT's centred line break.
func dotID(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func plugin(d *engine.PlanDoc, name string) engine.PlanPlugin {
	for _, p := range d.Plugins {
		if p.Name == name {
			return p
		}
	}
	return engine.PlanPlugin{Name: name}
}

// The SVG layout, in pixels.
const (
	margin   = 20
	header   = 40 // the title line and the wave labels above the columns
	colWidth = 220
	nodeW    = 170
	nodeH    = 44
	rowH     = 64
)

// SVG draws the plan: one column per wave, a labelled box per plugin (name and
// version; a plugin only required by another is drawn dashed), and a curve per
// dependency from the right of the plugin waited for to the left of the plugin
// that waits. The picture has a title and a description for screen readers.
func SVG(d *engine.PlanDoc) []byte {
	rows := 1
	for _, w := range d.Waves {
		rows = max(rows, len(w))
	}
	width := 2*margin + max(1, len(d.Waves))*colWidth - (colWidth - nodeW)
	height := 2*margin + header + rows*rowH - (rowH - nodeH)
	pos := map[string][2]int{} // top-left corner of each plugin's box
	for w, names := range d.Waves {
		for i, n := range names {
			pos[n] = [2]int{margin + w*colWidth, margin + header + i*rowH}
		}
	}
	esc := html.EscapeString
	title := fmt.Sprintf("Plan of cluster %s, Kubernetes %s", d.Cluster, d.KubernetesVersion)
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-labelledby="plan-title plan-desc" font-family="sans-serif" font-size="13">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, "<title id=\"plan-title\">%s</title>\n", esc(title))
	fmt.Fprintf(&b, "<desc id=\"plan-desc\">%s</desc>\n", esc(describe(d)))
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#444"/></marker></defs>` + "\n")
	b.WriteString(`<rect width="100%" height="100%" fill="#ffffff"/>` + "\n")
	fmt.Fprintf(&b, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\" fill=\"#111\">%s</text>\n", margin, margin+4, esc(title))
	for w := range d.Waves {
		fmt.Fprintf(&b, "<text x=\"%d\" y=\"%d\" fill=\"#333\">wave %d</text>\n", margin+w*colWidth, margin+header-10, w)
	}
	for _, e := range Edges(d) {
		f, t := pos[e.From], pos[e.To]
		x1, y1 := f[0]+nodeW, f[1]+nodeH/2
		x2, y2 := t[0], t[1]+nodeH/2
		fmt.Fprintf(&b, "<path class=\"edge\" data-from=\"%s\" data-to=\"%s\" d=\"%s\" fill=\"none\" stroke=\"#444\" stroke-width=\"1.5\" marker-end=\"url(#arrow)\"/>\n",
			esc(e.From), esc(e.To), edgePath(x1, y1, x2, y2, t[1]))
	}
	for _, p := range d.Plugins {
		xy, ok := pos[p.Name]
		if !ok {
			continue
		}
		dash := ""
		if !p.Enabled {
			dash = ` stroke-dasharray="5,3"`
		}
		fmt.Fprintf(&b, "<g class=\"plugin\" data-plugin=\"%s\">\n", esc(p.Name))
		fmt.Fprintf(&b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"8\" fill=\"#eef3fb\" stroke=\"#1f4e8c\" stroke-width=\"1.5\"%s/>\n", xy[0], xy[1], nodeW, nodeH, dash)
		fmt.Fprintf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-weight=\"bold\" fill=\"#111\">%s</text>\n", xy[0]+nodeW/2, xy[1]+19, esc(clip(p.Name, 22)))
		fmt.Fprintf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#333\">%s</text>\n", xy[0]+nodeW/2, xy[1]+36, esc(clip(p.Version, 24)))
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// edgePath is the curve from (x1,y1), the right of a box, to (x2,y2), the left
// of a box in a later column whose top is at top. Between neighbouring columns
// it is one S-curve; an edge that skips columns runs along the free lane below
// the target's row, so it never passes behind a box of a column between and
// seems to start there.
func edgePath(x1, y1, x2, y2, top int) string {
	gap := colWidth - nodeW
	if x2-x1 <= gap {
		mid := (x1 + x2) / 2
		return fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, mid, y1, mid, y2, x2, y2)
	}
	lane := top + nodeH + (rowH-nodeH)/2
	return fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d L%d,%d C%d,%d %d,%d %d,%d",
		x1, y1, x1+gap/2, y1, x1+gap/2, lane, x1+gap, lane,
		x2-gap, lane, x2-gap/2, lane, x2-gap/2, y2, x2, y2)
}

// describe says the graph in words, for the SVG's desc: each wave's plugins and
// what each waits for.
func describe(d *engine.PlanDoc) string {
	var parts []string
	for w, names := range d.Waves {
		parts = append(parts, fmt.Sprintf("wave %d: %s", w, strings.Join(names, ", ")))
	}
	for _, p := range d.Plugins {
		if len(p.After) > 0 {
			parts = append(parts, fmt.Sprintf("%s waits for %s", p.Name, strings.Join(p.After, ", ")))
		}
	}
	return strings.Join(parts, "; ")
}

// clip shortens s to n runes with an ellipsis, so a long name stays in its box.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// CheckPath says whether Write knows the format of path (ErrFormat if not), so
// a caller can refuse a bad path before the work that makes the plan.
func CheckPath(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg", ".dot":
		return nil
	}
	return fmt.Errorf("%w: %q: expected a file ending in .svg or .dot", ErrFormat, path)
}

// Write writes the plan's graph to path, as SVG or DOT after its extension
// (.svg, .dot; ErrFormat for any other).
func Write(path string, d *engine.PlanDoc) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	b := DOT(d)
	if strings.EqualFold(filepath.Ext(path), ".svg") {
		b = SVG(d)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil { //nolint:gosec // a picture the user asked for, as readable as the plan it shows
		return fmt.Errorf("writing the plan graph: %w", err)
	}
	return nil
}
