package kubeschema

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"

	"github.com/kubeplug/kubeplug/internal/suggest"
)

// Problem is one way an object does not fit its kind's schema.
type Problem struct {
	// Pointer is the JSON pointer of the field in the object.
	Pointer string
	// AtKey says the problem is the field's name (an unknown field), so it is
	// best located at the key rather than the value.
	AtKey bool
	// Message says what was expected and what was found.
	Message string
}

// Type is the schema of one kind.
type Type struct {
	schema *smdschema.Schema
	ref    smdschema.TypeRef
	// fields override the types of top-level fields: a CRD's metadata is
	// checked as the built-in ObjectMeta, as the API server does.
	fields map[string]Type
}

// Source finds the schemas of kinds.
type Source interface {
	// Type returns the schema of gvk; ok is false when the source has none.
	// An error means the source could not be asked (an unreachable cluster).
	Type(gvk schema.GroupVersionKind) (t Type, ok bool, err error)
}

// Sources asks each source in turn, the first that has a kind's schema wins.
type Sources []Source

var _ Source = Sources(nil)

// Type returns the first source's schema of gvk.
func (s Sources) Type(gvk schema.GroupVersionKind) (Type, bool, error) {
	for _, src := range s {
		if src == nil {
			continue
		}
		t, ok, err := src.Type(gvk)
		if err != nil || ok {
			return t, ok, err
		}
	}
	return Type{}, false, nil
}

// converterSource finds kinds through a managedfields.TypeConverter: the
// converter parses an object holding only apiVersion and kind, and the typed
// value it returns carries the kind's schema.
type converterSource struct {
	tc managedfields.TypeConverter
	// meta is the type of a CRD's metadata; empty for other sources.
	meta *Type
}

func (c converterSource) Type(gvk schema.GroupVersionKind) (Type, bool, error) {
	if c.tc == nil {
		return Type{}, false, nil
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	tv, err := c.tc.ObjectToTyped(&unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}})
	if err != nil || tv == nil || tv.Schema() == nil {
		return Type{}, false, nil //nolint:nilerr // the converter does not know the kind
	}
	t := Type{schema: tv.Schema(), ref: tv.TypeRef()}
	if c.meta != nil {
		t.fields = map[string]Type{"metadata": *c.meta}
	}
	return t, true, nil
}

// Validate checks obj (decoded JSON or YAML: maps, lists, strings, numbers as
// json.Number, float64 or integers, booleans and nil) against t and returns
// every problem, in the order of the object's sorted keys.
func (t Type) Validate(obj any) []Problem {
	v := &validator{}
	m, ok := obj.(map[string]any)
	if !ok || len(t.fields) == 0 {
		v.walk(t, obj, t.ref, "", 0)
		return v.out
	}
	// Overridden top-level fields are checked with their own types, the rest
	// with the kind's.
	rest := make(map[string]any, len(m))
	for k, e := range m {
		if ft, ok := t.fields[k]; ok {
			v.walk(ft, e, ft.ref, "/"+escape(k), 0)
			continue
		}
		rest[k] = e
	}
	v.walk(t, rest, t.ref, "", 0)
	slices.SortStableFunc(v.out, func(a, b Problem) int { return strings.Compare(a.Pointer, b.Pointer) })
	return v.out
}

type validator struct {
	out []Problem
}

// maxDepth bounds how deep validation follows an object, against a schema
// that refers to itself.
const maxDepth = 100

func (v *validator) walk(t Type, val any, ref smdschema.TypeRef, ptr string, depth int) {
	if val == nil || depth > maxDepth {
		return
	}
	atom, ok := t.schema.Resolve(ref)
	if !ok {
		return // a schema without this type: nothing to say
	}
	switch x := val.(type) {
	case map[string]any:
		if atom.Map == nil {
			v.mismatch(ptr, atom, val)
			return
		}
		for _, key := range slices.Sorted(maps.Keys(x)) {
			p := ptr + "/" + escape(key)
			if f, ok := atom.FindField(key); ok {
				v.walk(t, x[key], f.Type, p, depth+1)
				continue
			}
			if atom.Map.ElementType != (smdschema.TypeRef{}) {
				v.walk(t, x[key], atom.Map.ElementType, p, depth+1)
				continue
			}
			names := make([]string, len(atom.Fields))
			for i, f := range atom.Fields {
				names[i] = f.Name
			}
			v.out = append(v.out, Problem{Pointer: p, AtKey: true, Message: fmt.Sprintf("unknown field %q%s", key, suggest.Hint(suggest.Closest(key, names)))})
		}
	case []any:
		if atom.List == nil {
			v.mismatch(ptr, atom, val)
			return
		}
		for i, e := range x {
			v.walk(t, e, atom.List.ElementType, ptr+"/"+strconv.Itoa(i), depth+1)
		}
	default:
		if atom.Scalar == nil {
			v.mismatch(ptr, atom, val)
			return
		}
		if !scalarFits(*atom.Scalar, val) {
			v.mismatch(ptr, atom, val)
		}
	}
}

func scalarFits(s smdschema.Scalar, val any) bool {
	switch val.(type) {
	case string:
		return s == smdschema.String || s == smdschema.Untyped
	case bool:
		return s == smdschema.Boolean || s == smdschema.Untyped
	case json.Number, float64, float32, int, int32, int64, uint, uint32, uint64:
		return s == smdschema.Numeric || s == smdschema.Untyped
	}
	return false
}

// mismatch reports a value of the wrong kind.
func (v *validator) mismatch(ptr string, atom smdschema.Atom, val any) {
	var want []string
	if atom.Scalar != nil {
		switch *atom.Scalar {
		case smdschema.String:
			want = append(want, "a string")
		case smdschema.Numeric:
			want = append(want, "a number")
		case smdschema.Boolean:
			want = append(want, "a boolean")
		default:
			want = append(want, "a string, number or boolean")
		}
	}
	if atom.List != nil {
		want = append(want, "a list")
	}
	if atom.Map != nil {
		want = append(want, "a mapping")
	}
	if len(want) == 0 {
		return
	}
	v.out = append(v.out, Problem{Pointer: ptr, Message: "expected " + strings.Join(want, " or ") + ", found " + describe(val)})
}

func describe(val any) string {
	switch x := val.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		if len(x) > 40 {
			x = x[:37] + "..."
		}
		return "the string " + strconv.Quote(x)
	case bool:
		return "the boolean " + strconv.FormatBool(x)
	default:
		return "the number " + fmt.Sprint(x)
	}
}

func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
