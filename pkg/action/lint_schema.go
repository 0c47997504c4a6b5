package action

import (
	"context"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeplug/kubeplug/internal/suggest"
	"github.com/kubeplug/kubeplug/internal/yamldoc"
	"github.com/kubeplug/kubeplug/pkg/action/internal/kubeschema"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/runtime/declarative"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// requestRecorder is an in-process runtime that only remembers the request
// its plugin got at initialise: the values, cluster and plugins the
// declarative runtime rendered the manifests with.
type requestRecorder struct {
	mu   sync.Mutex
	req  *stage.Request
	next stage.Runtime // a runtime the caller had registered, called after
}

func (r *requestRecorder) Run(ctx context.Context, req *stage.Request) (*stage.Response, error) {
	if req.Stage == stage.Initialise {
		r.mu.Lock()
		r.req = req
		r.mu.Unlock()
	}
	if r.next != nil {
		return r.next.Run(ctx, req)
	}
	return &stage.Response{}, nil
}

func (r *requestRecorder) request() *stage.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.req
}

// schemaCheck validates the objects of one rendered plugin.
type schemaCheck struct {
	pkg *plugin.Package
	// rel is the package directory as the user named it.
	rel string
	// src finds schemas: the cluster's or the built-in ones, then the CRDs
	// of the render.
	src  kubeschema.Source
	live bool
	// fail records the first error of the source (an unreachable cluster);
	// checking stops there.
	fail *error
	// crdKinds are the kinds the render's CRDs define, by group version.
	crdKinds map[schema.GroupVersion][]string
	l        diag.List
}

func crdKinds(crds []map[string]any) map[schema.GroupVersion][]string {
	out := map[schema.GroupVersion][]string{}
	for _, crd := range crds {
		spec, _ := crd["spec"].(map[string]any)
		group, _ := spec["group"].(string)
		names, _ := spec["names"].(map[string]any)
		kind, _ := names["kind"].(string)
		versions, _ := spec["versions"].([]any)
		for _, v := range versions {
			vm, _ := v.(map[string]any)
			if name, _ := vm["name"].(string); name != "" && kind != "" {
				gv := schema.GroupVersion{Group: group, Version: name}
				out[gv] = append(out[gv], kind)
			}
		}
	}
	return out
}

// chartObjects are, among the rendered files, the objects of the plugin's
// Helm releases with the # Source each came from, and every
// CustomResourceDefinition of the render.
func chartObjects(pkg *plugin.Package, files map[string][]byte) (rendered []*yamldoc.Doc, sources []string, crds []map[string]any) {
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasPrefix(name, "kubernetes/") {
			continue
		}
		for _, chunk := range splitRendered(string(files[name])) {
			doc, dl := yamldoc.Parse(name, []byte(chunk.text))
			if doc == nil || dl.HasFatal() {
				continue
			}
			if isCRD(doc.Value) {
				crds = append(crds, doc.Value.(map[string]any))
			}
			if strings.HasSuffix(name, "-"+pkg.Name+".yaml") && strings.HasPrefix(chunk.source, "helm release ") {
				rendered = append(rendered, doc)
				sources = append(sources, chunk.source)
			}
		}
	}
	return rendered, sources, crds
}

// lintObjects validates every object the plugin renders with its default
// values against its kind's schema: the manifests as rendered from their
// files (so problems point at the file and line that wrote them), the charts'
// objects as Helm rendered them (at the template their # Source names, the
// line a best guess). CustomResourceDefinitions anywhere in the render give
// the schemas of their kinds.
func (a *Lint) lintObjects(ctx context.Context, pkg *plugin.Package, rel string, req *stage.Request, files map[string][]byte) diag.List {
	rendered, sources, crds := chartObjects(pkg, files)
	var manifests []declarative.RenderedManifest
	if req != nil {
		manifests = declarative.RenderManifests(ctx, pkg, req)
		for _, m := range manifests {
			docs, _ := yamldoc.ParseAll(m.File, []byte(m.Text))
			for _, d := range docs {
				if isCRD(d.Value) {
					crds = append(crds, d.Value.(map[string]any))
				}
			}
		}
	}
	crdSrc, errs := kubeschema.FromCRDs(crds)
	c := &schemaCheck{pkg: pkg, rel: rel, live: a.liveSrc != nil, fail: &a.liveErr, crdKinds: crdKinds(crds)}
	for _, err := range errs {
		c.l.Warnf(path.Join(rel, plugin.ManifestFile), 0, 0, "", "%v", err)
	}
	base := kubeschema.Builtin()
	if a.liveSrc != nil {
		base = a.liveSrc
	}
	c.src = kubeschema.Sources{base, crdSrc}

	for _, m := range manifests {
		docs, _ := yamldoc.ParseAll(m.File, []byte(m.Text))
		for _, d := range docs {
			c.object(d, func(ptr string, atKey bool) (string, int, int) {
				line, col := d.Pos(ptr)
				if atKey {
					line, col = d.KeyPos(ptr)
				}
				tl, tc := templateLine(m.Template, m.Text, line, col)
				return path.Join(rel, m.File), tl, tc
			})
		}
	}
	for i, d := range rendered {
		file, tmpl := a.chartSource(pkg, sources[i])
		c.object(d, func(ptr string, _ bool) (string, int, int) {
			if file == "" {
				return path.Join(rel, plugin.ManifestFile), 0, 0
			}
			line, col := guessLine(tmpl, ptr)
			return path.Join(rel, file), line, col
		})
	}
	return c.l
}

// object validates one object; locate says where a field of it is written.
func (c *schemaCheck) object(d *yamldoc.Doc, locate func(ptr string, atKey bool) (string, int, int)) {
	if *c.fail != nil {
		return
	}
	obj, ok := d.Value.(map[string]any)
	if !ok {
		return // the renderer reports what is no object
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if apiVersion == "" || kind == "" {
		file, line, col := locate("", false)
		var missing []string
		if apiVersion == "" {
			missing = append(missing, "apiVersion")
		}
		if kind == "" {
			missing = append(missing, "kind")
		}
		c.l.Errorf(file, line, col, "", "expected a Kubernetes object with %s", strings.Join(missing, " and "))
		return
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		file, line, col := locate("/apiVersion", false)
		c.l.Errorf(file, line, col, "apiVersion", "%v", err)
		return
	}
	gvk := gv.WithKind(kind)
	name := objectName(obj)
	t, ok, err := c.src.Type(gvk)
	if err != nil {
		*c.fail = err
		return
	}
	if !ok {
		file, line, col := locate("/kind", false)
		if near := suggest.Closest(kind, append(kubeschema.BuiltinKinds(gv), c.crdKinds[gv]...)); len(near) > 0 {
			c.l.Warnf(file, line, col, "kind", "%s has no kind %s%s", apiVersion, kind, suggest.Hint(near))
			return
		}
		where := "no schema offline: give --live to check it against a cluster"
		if c.live {
			where = "the cluster serves no such kind, and the plugin ships no CustomResourceDefinition for it"
		}
		c.l.Infof(file, line, col, "", "%s %s %s not validated (%s)", apiVersion, kind, name, where)
		return
	}
	for _, p := range t.Validate(obj) {
		file, line, col := locate(p.Pointer, p.AtKey)
		c.l.Errorf(file, line, col, yamldoc.FieldPath(d, p.Pointer), "%s (%s %s)", p.Message, kind, name)
	}
}

func objectName(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	if ns, _ := md["namespace"].(string); ns != "" {
		return ns + "/" + name
	}
	return name
}

func isCRD(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && gv.Group == kubeschema.CRDGroupKind.Group && kind == kubeschema.CRDGroupKind.Kind
}

// renderedChunk is one object of a rendered kubernetes/*.yaml file and the
// # Source comment render wrote above it.
type renderedChunk struct {
	source, text string
}

// splitRendered splits a rendered kubernetes/*.yaml file into its objects.
func splitRendered(s string) []renderedChunk {
	var out []renderedChunk
	for part := range strings.SplitSeq("\n"+s, "\n---\n") {
		part = strings.TrimPrefix(part, "\n")
		c := renderedChunk{text: part}
		if src, ok := strings.CutPrefix(part, "# Source: "); ok {
			c.source, _, _ = strings.Cut(src, "\n")
		}
		out = append(out, c)
	}
	return out
}

// chartSource turns render's "# Source: helm release NS/NAME, [hook ]CHART/templates/X"
// into the template's path in the package and its text.
func (a *Lint) chartSource(pkg *plugin.Package, source string) (file, text string) {
	rest := strings.TrimPrefix(source, "helm release ")
	release, tmpl, ok := strings.Cut(rest, ", ")
	if !ok {
		return "", ""
	}
	tmpl = strings.TrimPrefix(tmpl, "hook ")
	ns, name, _ := strings.Cut(release, "/")
	k := pkg.Manifest.Spec.Contributes
	if k == nil || k.Kubernetes == nil {
		return "", ""
	}
	for _, h := range k.Kubernetes.HelmReleases {
		hn := h.Name
		if hn == "" {
			hn = pkg.Name
		}
		if hn != name || h.Namespace != ns {
			continue
		}
		dir, err := plugin.CleanRef(h.Chart)
		if err != nil {
			return "", ""
		}
		// Helm names templates CHARTNAME/templates/X; subcharts
		// CHARTNAME/charts/SUB/templates/X.
		_, inChart, ok := strings.Cut(tmpl, "/")
		if !ok {
			return "", ""
		}
		f := path.Join(dir, inChart)
		b, err := readBounded(pkg.FS, f)
		if err != nil {
			return f, ""
		}
		return f, string(b)
	}
	return "", ""
}

// guessLine finds, in a chart template, the line most likely to have written
// the field at ptr: the first line holding its key (the nearest named
// ancestor's, for a list item).
func guessLine(tmpl, ptr string) (int, int) {
	toks := strings.Split(ptr, "/")
	for i := len(toks) - 1; i > 0; i-- {
		key := strings.ReplaceAll(strings.ReplaceAll(toks[i], "~1", "/"), "~0", "~")
		if isIndex(key) {
			continue
		}
		re := regexp.MustCompile(`^(\s*(?:-\s+)?)` + regexp.QuoteMeta(key) + `\s*:`)
		for n, line := range strings.Split(tmpl, "\n") {
			if m := re.FindStringSubmatch(line); m != nil {
				return n + 1, len(m[1]) + 1
			}
		}
		break
	}
	return 0, 0
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// templateLine maps a position in a rendered manifest to the template it was
// rendered from: the same line when rendering kept the lines, else the
// nearest template line that reads the same, else the nearest that renders
// into it (its text before the first {{ starts the rendered line). 0 when
// nothing matches.
func templateLine(tmpl, text string, line, col int) (int, int) {
	if line <= 0 {
		return 0, 0
	}
	tl := strings.Split(tmpl, "\n")
	rl := strings.Split(text, "\n")
	if line > len(rl) {
		return 0, 0
	}
	r := rl[line-1]
	colIn := func(t string) int {
		if col <= 0 {
			return 0
		}
		if col-1 <= len(t) && col-1 <= len(r) && t[:col-1] == r[:col-1] {
			return col
		}
		if i := strings.Index(t, "{{"); i >= 0 {
			return i + 1
		}
		return col
	}
	if len(tl) == len(rl) && (tl[line-1] == r || strings.Contains(tl[line-1], "{{")) {
		return line, colIn(tl[line-1])
	}
	best := func(match func(string) bool) int {
		found := 0
		for i, t := range tl {
			if match(t) && (found == 0 || abs(i+1-line) < abs(found-line)) {
				found = i + 1
			}
		}
		return found
	}
	if strings.TrimSpace(r) != "" {
		if n := best(func(t string) bool { return t == r }); n > 0 {
			return n, colIn(tl[n-1])
		}
	}
	if n := best(func(t string) bool {
		i := strings.Index(t, "{{")
		return i >= 0 && strings.TrimSpace(t[:i]) != "" && strings.HasPrefix(r, t[:i])
	}); n > 0 {
		return n, colIn(tl[n-1])
	}
	return 0, 0
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}
