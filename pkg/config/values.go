package config

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/yamldoc"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/values"
)

// Values are one enabled plugin's effective values.
type Values struct {
	// Plugin is the package the values are for.
	Plugin *plugin.Package
	// Cluster holds the cluster-level values: defaults, the cluster's values and
	// valuesFrom, merged.
	Cluster map[string]any
	// Pools holds, for each node pool the plugin is scoped to, the cluster-level values
	// with the pool's values merged over them. Nil when the plugin is not scoped, in
	// which case it applies to every pool with the cluster-level values.
	Pools map[string]map[string]any
	// Sensitive lists the JSON pointers that Redact hides.
	Sensitive []string
}

// ForPool returns the values that apply on a node pool, and whether the plugin applies
// to that pool at all.
func (v *Values) ForPool(pool string) (map[string]any, bool) {
	if v.Pools == nil {
		return v.Cluster, true
	}
	pv, ok := v.Pools[pool]
	return pv, ok
}

// Redacted returns the cluster-level values with sensitive ones hidden.
func (v *Values) Redacted() map[string]any { return values.Redact(v.Cluster, v.Sensitive) }

// Env looks up an environment variable; os.LookupEnv in production.
type Env func(name string) (string, bool)

// outside reports whether file, with its symlinks resolved, lies outside the
// cluster file's directory, and says where it leads when a link took it there.
func (c *Cluster) outside(file string) (string, bool) {
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return "", true
	}
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", true
	}
	real := abs
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		real = r
	}
	rel, err := filepath.Rel(dir, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		if real != abs {
			if err == nil {
				real = rel // relative to the directory: no machine path in messages
			}
			return " (a symlink that leads to " + real + ")", true
		}
		return "", true
	}
	return "", false
}

// layer is one source of values, with where to point when a value in it is wrong.
type layer struct {
	values map[string]any
	doc    *yamldoc.Doc    // nil when positions are unknown
	base   string          // pointer prefix of the values inside doc
	file   string          // used when doc is nil
	field  string          // used when doc is nil
	covers string          // for env layers: the one pointer this layer sets
	env    string          // for env layers: the variable's name
	strip  string          // prefix of value pointers that the doc does not have (valuesFrom file with path)
	pkg    *plugin.Package // for the defaults layer: positions in its plugin.yaml
}

// Values computes and checks the effective values of the enabled plugin at index i of
// spec.plugins.enabled, whose package is pkg. env resolves valuesFrom variables
// (os.LookupEnv when nil).
func (c *Cluster) Values(i int, pkg *plugin.Package, env Env) (*Values, diag.List) {
	return c.ValuesWith(i, pkg, ValuesOptions{Env: env})
}

// ValuesOptions configure ValuesWith.
type ValuesOptions struct {
	// Env resolves valuesFrom variables; os.LookupEnv when nil.
	Env Env
	// AllowOutside lets valuesFrom read files outside the cluster file's
	// directory, as Cluster.AllowValuesOutside does (either allows it).
	AllowOutside bool
	// Defaults are the plugin's defaults as rendered for this cluster
	// (declarative.RenderDefaults); nil takes spec.values.defaults as written.
	Defaults map[string]any
}

// ValuesWith is Values with options.
func (c *Cluster) ValuesWith(i int, pkg *plugin.Package, opts ValuesOptions) (*Values, diag.List) {
	env := opts.Env
	if env == nil {
		env = os.LookupEnv
	}
	var l diag.List
	ref := c.Enabled()[i]
	ptr := c.filePtr("/spec/plugins/enabled/" + strconv.Itoa(i))
	defaults := opts.Defaults
	if defaults == nil {
		defaults = pkg.Defaults()
	}
	layers := []layer{{
		values: defaults,
		file:   path.Join(pkg.Location, plugin.ManifestFile),
		field:  "spec.values.defaults",
		pkg:    pkg,
	}, {values: ref.Values, doc: c.doc, base: ptr + "/values"}}
	for j, vf := range ref.ValuesFrom {
		vp := ptr + "/valuesFrom/" + strconv.Itoa(j)
		var ly *layer
		if vf.File != "" {
			ly = c.fileLayer(vf, vp, opts, &l)
		} else {
			ly = c.envLayer(vf, vp, env, &l)
		}
		if ly != nil {
			layers = append(layers, *ly)
		}
	}
	out := &Values{Plugin: pkg, Sensitive: pkg.Sensitive(), Cluster: map[string]any{}}
	for _, ly := range layers {
		out.Cluster = values.Merge(out.Cluster, ly.values)
	}
	reported := map[string]bool{}
	c.checkValues(&l, ptr, pkg, out.Cluster, layers, out.Sensitive, reported)
	if len(ref.NodePools) > 0 {
		out.Pools = map[string]map[string]any{}
		for j, p := range ref.NodePools {
			pv := values.Merge(out.Cluster, p.Values)
			out.Pools[p.Name] = pv
			pl := append(slices.Clone(layers), layer{values: p.Values, doc: c.doc, base: ptr + "/nodePools/" + strconv.Itoa(j) + "/values"})
			c.checkValues(&l, ptr, pkg, pv, pl, out.Sensitive, reported)
		}
	}
	return out, l
}

// fileLayer is the layer of a valuesFrom entry vf (at vp) that names a
// values file: a YAML mapping, nested at vf.Path when set. nil when there is
// none (an optional file missing) or it is refused, in l: outside the cluster
// file's directory without leave, unreadable, or not a mapping.
func (c *Cluster) fileLayer(vf v1alpha1.ValuesSource, vp string, opts ValuesOptions, l *diag.List) *layer {
	file := c.path(vf.File)
	if where, out := c.outside(file); out && !c.AllowValuesOutside && !opts.AllowOutside {
		c.doc.Errorf(l, vp+"/file", "values file %s is outside the cluster file's directory %s%s; "+
			"move it there, or allow reading values from anywhere with --allow-values-outside", file, c.Dir, where)
		return nil
	}
	data, err := readFile(file)
	if err != nil {
		if !vf.Optional || !errors.Is(err, errNotFound) {
			c.doc.Errorf(l, vp+"/file", "values file %s: %v", file, err)
		}
		return nil
	}
	fdoc, fl := yamldoc.Parse(file, data)
	*l = append(*l, fl...)
	if fdoc == nil {
		return nil
	}
	m, ok := fdoc.Value.(map[string]any)
	if !ok {
		found := "a scalar"
		switch fdoc.Value.(type) {
		case []any:
			found = "a list"
		case nil:
			found = "null"
		}
		fdoc.Errorf(l, "", "expected a mapping of values, found %s", found)
		return nil
	}
	if vf.Path != "" {
		nested := map[string]any{}
		_ = values.Set(nested, vf.Path, m)
		m = nested
	}
	return &layer{values: m, doc: fdoc, strip: vf.Path}
}

// envLayer is the layer of a valuesFrom entry vf (at vp) that names an
// environment variable, read with env, set at vf.Path; nil when it is unset
// (an error in l unless the entry is optional) or the path is refused.
func (c *Cluster) envLayer(vf v1alpha1.ValuesSource, vp string, env func(string) (string, bool), l *diag.List) *layer {
	s, ok := env(vf.Env)
	if !ok {
		if !vf.Optional {
			c.doc.Errorf(l, vp+"/env", "environment variable %s is not set (mark the entry optional: true if it may be absent)", vf.Env)
		}
		return nil
	}
	m := map[string]any{}
	if err := values.Set(m, vf.Path, s); err != nil {
		c.doc.Errorf(l, vp+"/path", "%v", err)
		return nil
	}
	return &layer{values: m, doc: c.doc, base: vp, covers: vf.Path, env: vf.Env}
}

// checkValues validates merged values against the plugin's schema, reporting each
// violation once, at the highest layer that holds the offending value.
func (c *Cluster) checkValues(l *diag.List, entry string, pkg *plugin.Package, v map[string]any, layers []layer, sensitive []string, reported map[string]bool) {
	if pkg.Schema == nil {
		return
	}
	for _, viol := range yamldoc.Check(pkg.Schema, v) {
		msg := viol.Message
		if values.IsSensitive(viol.Pointer, sensitive) || reveals(msg, v, viol.Pointer, sensitive) {
			msg = "value does not match the schema (sensitive, not shown)"
		}
		msg = fmt.Sprintf("plugin %s values %s: %s (schema rule %s)", pkg.Name, displayPtr(viol.Pointer), msg, viol.Rule)
		if reported[msg] {
			continue
		}
		reported[msg] = true
		ly, at := locate(layers, viol.Pointer)
		switch {
		case ly == nil:
			c.doc.Errorf(l, entry, "%s", msg)
		case ly.pkg != nil:
			file, line, col, field := ly.pkg.ManifestPos("/spec/values/defaults" + at)
			l.Errorf(file, line, col, field, "%s", msg)
		case ly.doc == nil:
			l.Errorf(ly.file, 0, 0, ly.field+yamldoc.FieldPath(nil, at), "%s", msg)
		case ly.covers != "":
			ly.doc.Errorf(l, ly.base+"/env", "%s; the value comes from environment variable %s", msg, ly.env)
		case viol.AtKey && at == viol.Pointer:
			// An unknown field: point at its key, as the cluster schema does.
			p := ly.base + strings.TrimPrefix(at, ly.strip)
			line, col := ly.doc.KeyPos(p)
			l.Errorf(ly.doc.File, line, col, yamldoc.FieldPath(ly.doc, p), "%s", msg)
		default:
			ly.doc.Errorf(l, ly.base+strings.TrimPrefix(at, ly.strip), "%s", msg)
		}
	}
}

// reveals reports whether msg, about the value at ptr, quotes a sensitive value
// inside it: a rule such as enum on a mapping prints the whole mapping.
func reveals(msg string, v map[string]any, ptr string, sensitive []string) bool {
	for _, s := range sensitive {
		if !strings.HasPrefix(s, ptr+"/") {
			continue
		}
		if sv, ok := values.Get(v, s); ok && sv != nil && sv != "" && strings.Contains(msg, fmt.Sprint(sv)) {
			return true
		}
	}
	return false
}

// locate finds the highest layer holding ptr or, failing that, its nearest ancestor.
func locate(layers []layer, ptr string) (*layer, string) {
	for p := ptr; ; {
		for i := len(layers) - 1; i >= 0; i-- {
			ly := &layers[i]
			if p == "" && ly.doc == nil {
				continue
			}
			if ly.covers != "" {
				if p == ly.covers {
					return ly, p
				}
				continue
			}
			if _, ok := values.Get(ly.values, p); ok && (p != "" || len(ly.values) > 0) {
				return ly, p
			}
		}
		if p == "" {
			return nil, ""
		}
		p = p[:lastSlash(p)]
	}
}

func lastSlash(p string) int {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return i
		}
	}
	return 0
}

func displayPtr(p string) string {
	if p == "" {
		return "/"
	}
	return p
}
