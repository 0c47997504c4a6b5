package valuerefs

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/kubeplug/kubeplug/internal/suggest"
	"github.com/kubeplug/kubeplug/pkg/values"
)

// Known is what a plugin or chart declares about its values: the values that
// can be given without anything being missing.
//
// A path is known when the defaults hold it, or the schema declares it: a
// property, or a name under patternProperties, additionalProperties (unless
// false) or a schema that lists no properties at all (a free-form object).
// Unlike JSON Schema's own rule, a schema that lists properties and says
// nothing of additionalProperties is taken as closed: that is how a typo is
// told from a value nobody declared. $ref (inside the schema), allOf, anyOf,
// oneOf and if/then/else are followed.
type Known struct {
	// Defaults are the default values; nil when there are none.
	Defaults map[string]any
	// Schema is the values schema, decoded from JSON (a map or a bool); nil
	// when there is none.
	Schema any
}

// maxRefDepth bounds how many $ref and composition levels are followed, so a
// schema that refers to itself ends.
const maxRefDepth = 32

// Lookup says whether path is known. When it is not, depth is the index of
// the first element that is not, and near are the names known at that level
// that are close to it, nearest first.
//
// Nothing is known to be missing when k declares nothing (no defaults, no
// schema): then every path counts as known.
func (k *Known) Lookup(path []string) (ok bool, depth int, near []string) {
	if k.Defaults == nil && k.Schema == nil {
		return true, 0, nil
	}
	var maps []map[string]any
	if k.Defaults != nil {
		maps = append(maps, k.Defaults)
	}
	var schemas []map[string]any
	if k.Schema != nil {
		if k.expand(k.Schema, 0, &schemas) {
			return true, 0, nil
		}
	}
	for i, key := range path {
		nextMaps, inDefaults, open := defaultsBelow(maps, key)
		if open {
			return true, 0, nil
		}
		nextSchemas, inSchema, open := k.schemasBelow(schemas, key)
		if open {
			return true, 0, nil
		}
		if !inDefaults && !inSchema {
			return false, i, suggest.Closest(key, names(maps, schemas))
		}
		maps, schemas = nextMaps, nextSchemas
		if len(maps) == 0 && len(schemas) == 0 {
			// Declared, with nothing said of what lies below.
			return true, 0, nil
		}
	}
	return true, 0, nil
}

// defaultsBelow are the maps that key holds in the defaults maps, and
// whether any holds it; open when one holds what the defaults say nothing
// below of: a scalar, a list, null or an empty map.
func defaultsBelow(maps []map[string]any, key string) (next []map[string]any, found, open bool) {
	for _, m := range maps {
		v, has := m[key]
		if !has {
			continue
		}
		found = true
		sub, isMap := v.(map[string]any)
		if !isMap {
			// A scalar, a list or null: what lies below is not the
			// defaults' to say (and a field of a scalar fails at render).
			return nil, true, true
		}
		if len(sub) == 0 {
			// `resources: {}`: a place for anything, Helm's idiom.
			return nil, true, true
		}
		next = append(next, sub)
	}
	return next, found, false
}

// schemasBelow are the object schemas of key's property in schemas, and
// whether any declares it; open when one lets key hold anything.
func (k *Known) schemasBelow(schemas []map[string]any, key string) (next []map[string]any, found, open bool) {
	for _, s := range schemas {
		sub, has, open := property(s, key)
		if open {
			return nil, true, true
		}
		if !has {
			continue
		}
		found = true
		if k.expand(sub, 0, &next) {
			return nil, true, true
		}
	}
	return next, found, false
}

// expand appends to out the object schemas that s stands for, following $ref
// and composition, and reports whether s accepts any value below it (true, an
// empty schema, an object schema that lists no properties).
//
// Branches: one case per JSON Schema keyword that stands for other schemas
// ($ref, allOf/anyOf/oneOf, then/else) or says what properties there are
// (properties, patternProperties, additionalProperties), as the spec lists them.
func (k *Known) expand(s any, depth int, out *[]map[string]any) (open bool) {
	if depth > maxRefDepth {
		return true
	}
	switch s := s.(type) {
	case bool:
		return s
	case map[string]any:
		composed := false
		if ref, ok := s["$ref"].(string); ok {
			composed = true
			target, found := k.resolve(ref)
			if !found || k.expand(target, depth+1, out) {
				return true
			}
		}
		for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
			list, ok := s[kw].([]any)
			if !ok {
				continue
			}
			composed = true
			for _, sub := range list {
				if k.expand(sub, depth+1, out) {
					return true
				}
			}
		}
		for _, kw := range []string{"then", "else"} {
			if sub, ok := s[kw]; ok {
				composed = true
				if k.expand(sub, depth+1, out) {
					return true
				}
			}
		}
		_, props := s["properties"]
		_, pats := s["patternProperties"]
		_, addl := s["additionalProperties"]
		if !props && !pats && !addl {
			// Says nothing about properties: a free-form object, a scalar
			// (whose fields fail at render), or only composition.
			return !composed
		}
		*out = append(*out, s)
		return false
	}
	return true
}

// property returns the schema key has in the object schema s; open when s
// lets any key hold anything.
func property(s map[string]any, key string) (sub any, has, open bool) {
	if props, ok := s["properties"].(map[string]any); ok {
		if sub, ok := props[key]; ok {
			return sub, true, false
		}
	}
	if pats, ok := s["patternProperties"].(map[string]any); ok {
		for p := range pats {
			re, err := regexp.Compile(p)
			if err != nil || re.MatchString(key) {
				return nil, false, true
			}
		}
	}
	if a, ok := s["additionalProperties"]; ok && a != false {
		return nil, false, true
	}
	return nil, false, false
}

// resolve finds a local reference (#/$defs/x, #/definitions/x) in the schema.
func (k *Known) resolve(ref string) (any, bool) {
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	if ptr == "" {
		return k.Schema, true
	}
	root, ok := k.Schema.(map[string]any)
	if !ok {
		return nil, false
	}
	return values.Get(root, ptr)
}

// names are the keys the defaults and the schemas know at one level.
func names(ms []map[string]any, schemas []map[string]any) []string {
	set := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			set[k] = true
		}
	}
	for _, s := range schemas {
		if props, ok := s["properties"].(map[string]any); ok {
			for k := range props {
				set[k] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Finding is a reference to a value that is not known.
type Finding struct {
	Ref
	// Missing is the reference up to and including its first unknown element:
	// .Values.image.tga for .Values.image.tga.x.
	Missing string
	// Near are the names the author probably meant instead of that element.
	Near []string
}

// Message says what is wrong, for a diagnostic.
func (f Finding) Message(owner string) string {
	return f.Missing + " is not in " + owner + " (defaults or schema), so it renders empty" + suggest.Hint(f.Near)
}

// Check returns the references in text that are neither guarded nor known,
// and the template's parse error if it has one.
func (k *Known) Check(text string) ([]Finding, error) {
	refs, err := Find(text)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, r := range refs {
		if r.Guarded {
			continue
		}
		ok, depth, near := k.Lookup(r.Path)
		if ok {
			continue
		}
		out = append(out, Finding{Ref: r, Missing: ".Values." + strings.Join(r.Path[:depth+1], "."), Near: near})
	}
	return out, nil
}
