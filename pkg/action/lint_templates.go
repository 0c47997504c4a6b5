package action

import (
	"encoding/json"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// templated are the parts of plugin.yaml whose strings (keys included) are
// rendered as templates; "{{" anywhere else would be taken literally.
var templated = []string{"/spec/contributes", "/spec/values/defaults", "/spec/validate"}

// lintTemplates reports what looks like a template where kubeplug renders
// none, since it would land on the machine or in the cluster as written: "{{"
// in a field of plugin.yaml that is not templated (an error at its line), and a
// node file's source that holds "{{" without saying whether it is a template
// (an error at the file's line: template: true renders it, template: false
// copies it as is, for a script whose "{{" is its own).
func lintTemplates(pkg *plugin.Package) diag.List {
	if pkg == nil || pkg.Manifest == nil {
		return nil
	}
	var l diag.List
	if raw, err := json.Marshal(pkg.Manifest); err == nil {
		var tree any
		if json.Unmarshal(raw, &tree) == nil {
			walkKeysAndStrings(tree, "", func(ptr, s string) {
				for _, t := range templated {
					if ptr == t || strings.HasPrefix(ptr, t+"/") {
						return
					}
				}
				file, line, col, field := pkg.ManifestPos(ptr)
				l.Errorf(file, line, col, field, "%q looks like a template, but this field is not rendered: it would be used as written", s)
			})
		}
	}
	c := pkg.Manifest.Spec.Contributes
	if c == nil {
		return l
	}
	for i, n := range c.Nodes {
		for j, f := range n.Files {
			if f.Source == "" || f.Template != nil {
				continue
			}
			name, err := plugin.CleanRef(f.Source)
			if err != nil {
				continue // Load reports it
			}
			b, err := fs.ReadFile(pkg.FS, name)
			if err != nil {
				continue
			}
			at := strings.Index(string(b), "{{")
			if at < 0 {
				continue
			}
			line := 1 + strings.Count(string(b[:at]), "\n")
			col := 1 + at - (strings.LastIndex(string(b[:at]), "\n") + 1)
			_, _, _, field := pkg.ManifestPos("/spec/contributes/nodes/" + strconv.Itoa(i) + "/files/" + strconv.Itoa(j) + "/source")
			l.Errorf(path.Join(pkg.Location, name), line, col, field,
				"%s holds \"{{\" but is copied byte for byte: set template: true on this file to render it, or template: false to copy it as written", f.Source)
		}
	}
	return l
}

// walkKeysAndStrings calls f for every string and every key of v that holds
// "{{", with its JSON pointer (a key's is the pointer of its value).
func walkKeysAndStrings(v any, ptr string, f func(ptr, s string)) {
	switch t := v.(type) {
	case string:
		if strings.Contains(t, "{{") {
			f(ptr, t)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			kp := ptr + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			if strings.Contains(k, "{{") {
				f(kp, k)
			}
			walkKeysAndStrings(t[k], kp, f)
		}
	case []any:
		for i, e := range t {
			walkKeysAndStrings(e, ptr+"/"+strconv.Itoa(i), f)
		}
	}
}
