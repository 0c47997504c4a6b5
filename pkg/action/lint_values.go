package action

import (
	"encoding/json"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/yamldoc"
	"github.com/kubeplug/kubeplug/pkg/action/internal/valuerefs"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// maxLintedFile bounds a template file lint reads for value references; the
// package loader has already refused larger files.
const maxLintedFile = plugin.MaxManifestSize

// lintValueRefs warns about every template reference to a value that neither
// the defaults nor the schema declare, and that the template does not guard
// (default, required, if, ...): it would render empty without a word, as
// `{{ .Values.mesage }}` does. It looks at the templates of plugin.yaml's
// contributes block, at the manifest files and at each chart's templates
// (against the chart's own values).
func lintValueRefs(pkg *plugin.Package) diag.List {
	if pkg == nil || pkg.Manifest == nil || pkg.Manifest.Spec.Contributes == nil {
		return nil
	}
	known := &valuerefs.Known{Defaults: pkg.Defaults(), Schema: rawSchema(pkg.FS, "", valuesSchemaRef(pkg))}
	if len(known.Defaults) == 0 {
		known.Defaults = nil
	}
	const owner = "the plugin's values"
	var l diag.List
	c := pkg.Manifest.Spec.Contributes

	lintManifestRefs(pkg, known, owner, &l)
	// Manifest files: templates over the same values.
	if k := c.Kubernetes; k != nil {
		for _, ref := range k.Manifests {
			for _, f := range manifestFiles(pkg.FS, ref) {
				checkFile(pkg.FS, f, path.Join(pkg.Location, f), known, owner, &l)
			}
		}
		for _, h := range k.HelmReleases {
			dir, err := plugin.CleanRef(h.Chart)
			if err != nil {
				continue // reported by Load
			}
			ck := chartKnown(pkg.FS, dir, releaseKeys(pkg.FS, h))
			for _, f := range chartTemplates(pkg.FS, dir) {
				checkFile(pkg.FS, f, path.Join(pkg.Location, f), ck, "the chart's values", &l)
			}
		}
	}
	return l
}

// lintManifestRefs warns about the unknown value references of plugin.yaml's
// contributes block, every string of which is a template.
func lintManifestRefs(pkg *plugin.Package, known *valuerefs.Known, owner string, l *diag.List) {
	raw, err := json.Marshal(pkg.Manifest.Spec.Contributes)
	if err != nil {
		return
	}
	var tree any
	if json.Unmarshal(raw, &tree) != nil {
		return
	}
	manifest, _ := fs.ReadFile(pkg.FS, plugin.ManifestFile)
	lines := strings.Split(string(manifest), "\n")
	walkStrings(tree, "/spec/contributes", func(ptr, s string) {
		found, err := known.Check(s)
		if err != nil {
			return // rendering reports it
		}
		for _, f := range found {
			file, line, col, field := pkg.ManifestPos(ptr)
			line, col = inScalar(lines, line, col, f.Line, f.Column)
			l.Warnf(file, line, col, field, "%s", f.Message(owner))
		}
	})
}

// releaseKeys are the values a Helm release sets, its values files' and its
// own, merged: keys the chart's templates may use besides the chart's.
func releaseKeys(fsys fs.FS, h v1alpha1.HelmRelease) map[string]any {
	release := map[string]any{}
	for _, f := range h.ValuesFiles {
		clean, err := plugin.CleanRef(f)
		if err != nil {
			continue
		}
		b, err := readBounded(fsys, clean)
		if err != nil {
			continue
		}
		if doc, dl := yamldoc.Parse(clean, b); doc != nil && !dl.HasFatal() {
			if m, ok := doc.Value.(map[string]any); ok {
				mergeKeys(release, m)
			}
		}
	}
	mergeKeys(release, h.Values)
	return release
}

// checkFile warns about the unknown value references of one template file.
func checkFile(fsys fs.FS, name, file string, known *valuerefs.Known, owner string, l *diag.List) {
	b, err := readBounded(fsys, name)
	if err != nil {
		return // Load and rendering report unreadable files
	}
	found, err := known.Check(string(b))
	if err != nil {
		return
	}
	for _, f := range found {
		l.Warnf(file, f.Line, f.Column, "", "%s", f.Message(owner))
	}
}

func readBounded(fsys fs.FS, name string) ([]byte, error) {
	fi, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxLintedFile {
		return nil, fs.ErrInvalid
	}
	return fs.ReadFile(fsys, name)
}

func valuesSchemaRef(pkg *plugin.Package) string {
	if v := pkg.Manifest.Spec.Values; v != nil {
		return v.Schema
	}
	return ""
}

// rawSchema reads a values schema (JSON or YAML) as plain values; nil when
// there is none or it cannot be read (Load reports that).
func rawSchema(fsys fs.FS, dir, ref string) any {
	if ref == "" {
		return nil
	}
	clean, err := plugin.CleanRef(ref)
	if err != nil {
		return nil
	}
	name := path.Join(dir, clean)
	b, err := readBounded(fsys, name)
	if err != nil {
		return nil
	}
	doc, dl := yamldoc.Parse(name, b)
	if doc == nil || dl.HasFatal() {
		return nil
	}
	return doc.Value
}

// chartKnown is what a chart's templates may refer to: its values.yaml, its
// values.schema.json and the values the plugin passes to the release.
func chartKnown(fsys fs.FS, dir string, release map[string]any) *valuerefs.Known {
	k := &valuerefs.Known{Schema: rawSchema(fsys, dir, "values.schema.json")}
	defaults := map[string]any{}
	if b, err := readBounded(fsys, path.Join(dir, "values.yaml")); err == nil {
		if doc, dl := yamldoc.Parse(path.Join(dir, "values.yaml"), b); doc != nil && !dl.HasFatal() {
			if m, ok := doc.Value.(map[string]any); ok {
				mergeKeys(defaults, m)
			}
		}
	}
	mergeKeys(defaults, release)
	k.Defaults = defaults
	return k
}

// mergeKeys adds src's keys to dst, recursively where both hold a map.
func mergeKeys(dst, src map[string]any) {
	for key, v := range src {
		if dm, ok := dst[key].(map[string]any); ok {
			if sm, ok := v.(map[string]any); ok {
				next := make(map[string]any, len(dm))
				for k2, v2 := range dm {
					next[k2] = v2
				}
				mergeKeys(next, sm)
				dst[key] = next
				continue
			}
		}
		dst[key] = v
	}
}

// manifestFiles lists the manifest files at ref (a file or a directory,
// walked in lexical order) the way the declarative runtime renders them.
func manifestFiles(fsys fs.FS, ref string) []string {
	clean, err := plugin.CleanRef(ref)
	if err != nil {
		return nil
	}
	var files []string
	_ = fs.WalkDir(fsys, clean, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil //nolint:nilerr // an unreadable part is reported by rendering
		}
		switch path.Ext(p) {
		case ".yaml", ".yml", ".json":
			if !de.IsDir() {
				files = append(files, p)
			}
		}
		return nil
	})
	return files
}

// chartTemplates lists a chart's own templates that Helm renders to objects:
// files under templates/ whose names do not start with "_" (helpers, whose
// dot is whatever their caller passes), without its subcharts'.
func chartTemplates(fsys fs.FS, dir string) []string {
	var files []string
	_ = fs.WalkDir(fsys, path.Join(dir, "templates"), func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() || strings.HasPrefix(de.Name(), "_") {
			return nil //nolint:nilerr // an unreadable part is reported by rendering
		}
		switch path.Ext(p) {
		case ".yaml", ".yml", ".json", ".tpl":
			files = append(files, p)
		}
		return nil
	})
	slices.Sort(files)
	return files
}

// walkStrings calls f with every string in v and its JSON pointer below ptr.
func walkStrings(v any, ptr string, f func(ptr, s string)) {
	switch t := v.(type) {
	case string:
		if strings.Contains(t, "{{") {
			f(ptr, t)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			walkStrings(t[k], ptr+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"), f)
		}
	case []any:
		for i, e := range t {
			walkStrings(e, ptr+"/"+strconv.Itoa(i), f)
		}
	}
}

// inScalar places a position inside a YAML scalar (line and column within its
// text, 1-based) in the file, given where the scalar starts (line, col) and the
// file's lines: after the opening quote of a quoted scalar, on the lines after
// the indicator of a block scalar (| or >). It is exact for plain, quoted and
// block scalars without escapes or folding, and a best guess otherwise.
func inScalar(lines []string, line, col, inLine, inCol int) (int, int) {
	if line <= 0 || line > len(lines) || col <= 0 {
		return line, col
	}
	text := lines[line-1]
	if col > len(text) {
		return line, col
	}
	switch text[col-1] {
	case '|', '>':
		l := line + inLine
		if l > len(lines) {
			return line, col
		}
		body := lines[l-1]
		indent := len(body) - len(strings.TrimLeft(body, " "))
		return l, indent + inCol
	case '"', '\'':
		col++
	}
	if inLine == 1 {
		return line, col + inCol - 1
	}
	return line + inLine - 1, inCol
}
