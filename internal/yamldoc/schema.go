package yamldoc

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/kubeplug/kubeplug/pkg/diag"
)

// CompileSchemaJSON compiles a JSON Schema given as JSON text.
func CompileSchemaJSON(url string, doc []byte) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("parse schema %s: %w", url, err)
	}
	return CompileSchema(url, v)
}

// CompileSchema compiles a JSON Schema given as a plain value (draft 2020-12 unless it
// says otherwise). url names the schema in errors and resolves relative $refs.
func CompileSchema(url string, v any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	// Only the given document may be used: never load a $ref from disk or network.
	c.UseLoader(noLoader{})
	if err := c.AddResource(url, v); err != nil {
		return nil, fmt.Errorf("load schema %s: %w", url, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("compile schema %s: %w", url, err)
	}
	return sch, nil
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema references %s, but schemas may only reference themselves", url)
}

// Violation is one way a value breaks its schema.
type Violation struct {
	// Pointer is the JSON pointer of the offending value (for an unknown or missing
	// field, the field itself).
	Pointer string
	// AtKey says the position to report is the key (unknown fields), not the value.
	AtKey bool
	// Message says what was expected and what was found.
	Message string
	// Rule is the schema location of the keyword that failed, for example
	// /properties/replicas/minimum.
	Rule string
}

var printer = message.NewPrinter(language.English)

// Check validates v against sch and returns every violation, in a stable order.
func Check(sch *jsonschema.Schema, v any) []Violation {
	err := sch.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []Violation{{Message: err.Error()}}
	}
	var out []Violation
	collect(ve, &out)
	slices.SortStableFunc(out, func(a, b Violation) int {
		if c := strings.Compare(a.Pointer, b.Pointer); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return slices.CompactFunc(out, func(a, b Violation) bool { return a.Pointer == b.Pointer && a.Message == b.Message })
}

// Branches: one case per kind of JSON Schema violation, each turned into its own
// message.
func collect(e *jsonschema.ValidationError, out *[]Violation) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			collect(c, out)
		}
		return
	}
	ptr := Pointer(e.InstanceLocation...)
	rule := e.SchemaURL
	if i := strings.IndexByte(rule, '#'); i >= 0 {
		rule = rule[i+1:]
	}
	if kp := e.ErrorKind.KeywordPath(); len(kp) > 0 {
		rule += "/" + strings.Join(kp, "/")
	}
	if rule == "" {
		rule = "/"
	}
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			*out = append(*out, Violation{Pointer: ptr + "/" + escape(p), AtKey: true, Message: fmt.Sprintf("unknown field %q", p), Rule: rule})
		}
	case *kind.Required:
		for _, p := range k.Missing {
			*out = append(*out, Violation{Pointer: ptr + "/" + escape(p), Message: fmt.Sprintf("missing required field %q", p), Rule: rule})
		}
	case *kind.Type:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = typeName(w)
		}
		msg := fmt.Sprintf("expected %s, found %s", strings.Join(want, " or "), typeName(k.Got))
		if len(k.Want) == 1 && k.Want[0] == "string" && (k.Got == "number" || k.Got == "integer" || k.Got == "boolean") {
			msg += "; quote the value to make it a string"
		}
		*out = append(*out, Violation{Pointer: ptr, Message: msg, Rule: rule})
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = show(w)
		}
		*out = append(*out, Violation{Pointer: ptr, Message: fmt.Sprintf("expected one of %s, found %s", strings.Join(want, ", "), show(k.Got)), Rule: rule})
	case *kind.Pattern:
		if k.Want == envName {
			*out = append(*out, Violation{Pointer: ptr, Message: fmt.Sprintf("expected an environment variable name (letters, digits and '_', not starting with a digit), found %q", k.Got), Rule: rule})
			break
		}
		if k.Want == dnsLabel {
			*out = append(*out, Violation{Pointer: ptr, Message: fmt.Sprintf("expected a name of lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS label), found %q", k.Got), Rule: rule})
			break
		}
		if k.Want == SemverPattern {
			*out = append(*out, Violation{Pointer: ptr, Message: fmt.Sprintf("expected a semantic version such as 1.4.0, found %q", k.Got), Rule: rule})
			break
		}
		*out = append(*out, Violation{Pointer: ptr, Message: fmt.Sprintf("expected a value matching %s, found %q", k.Want, k.Got), Rule: rule})
	case *kind.MaxLength:
		*out = append(*out, Violation{Pointer: ptr, Message: fmt.Sprintf("expected at most %d characters, found %d", k.Want, k.Got), Rule: rule})
	case *kind.MinItems:
		*out = append(*out, Violation{Pointer: ptr, Message: fmt.Sprintf("expected at least %d items, found %d", k.Want, k.Got), Rule: rule})
	case *kind.MaxItems:
		*out = append(*out, Violation{Pointer: ptr, Message: fmt.Sprintf("expected at most %d items, found %d", k.Want, k.Got), Rule: rule})
	case *kind.Minimum:
		*out = append(*out, Violation{Pointer: ptr, Message: fmt.Sprintf("expected at least %s, found %s", ratString(k.Want), ratString(k.Got)), Rule: rule})
	case *kind.Maximum:
		*out = append(*out, Violation{Pointer: ptr, Message: fmt.Sprintf("expected at most %s, found %s", ratString(k.Want), ratString(k.Got)), Rule: rule})
	case *kind.ExclusiveMinimum:
		*out = append(*out, Violation{Pointer: ptr, Message: fmt.Sprintf("expected more than %s, found %s", ratString(k.Want), ratString(k.Got)), Rule: rule})
	case *kind.ExclusiveMaximum:
		*out = append(*out, Violation{Pointer: ptr, Message: fmt.Sprintf("expected less than %s, found %s", ratString(k.Want), ratString(k.Got)), Rule: rule})
	case *kind.MinLength:
		if k.Want == 1 {
			*out = append(*out, Violation{Pointer: ptr, Message: "expected a non-empty string", Rule: rule})
			break
		}
		*out = append(*out, Violation{Pointer: ptr, Message: fmt.Sprintf("expected at least %d characters, found %d", k.Want, k.Got), Rule: rule})
	default:
		*out = append(*out, Violation{Pointer: ptr, Message: e.ErrorKind.LocalizedString(printer), Rule: rule})
	}
}

// SemverPattern is the pattern the kubeplug schemas use for versions (semver 2.0,
// without a leading v), so a bad version is reported with every other schema problem.
const SemverPattern = `^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`

// dnsLabel is the pattern the kubeplug schemas use for names.
const dnsLabel = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

// envName is the pattern of an environment variable's name in valuesFrom.
const envName = "^[A-Za-z_][A-Za-z0-9_]*$"

// typeName names a JSON Schema type the way YAML users call it.
func typeName(t string) string {
	switch t {
	case "object":
		return "a mapping"
	case "array":
		return "a list"
	case "string":
		return "a string"
	case "integer":
		return "an integer"
	case "number":
		return "a number"
	case "boolean":
		return "a boolean (true or false)"
	}
	return t // null
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// MetaschemaViolations returns how a schema document breaks the JSON Schema
// metaschema when err, from CompileSchema, says so; pointers are into the schema
// document. It returns nil for any other error.
func MetaschemaViolations(err error) []Violation {
	var se *jsonschema.SchemaValidationError
	if !errors.As(err, &se) {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(se.Err, &ve) {
		return nil
	}
	var out []Violation
	collect(ve, &out)
	slices.SortStableFunc(out, func(a, b Violation) int { return strings.Compare(a.Pointer, b.Pointer) })
	return slices.CompactFunc(out, func(a, b Violation) bool { return a.Pointer == b.Pointer && a.Message == b.Message })
}

func show(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// Validate checks the whole document against sch and returns one diagnostic per
// violation, located at the offending key or value.
func (d *Doc) Validate(sch *jsonschema.Schema) diag.List {
	var l diag.List
	for _, v := range Check(sch, d.Value) {
		line, col := d.Pos(v.Pointer)
		if v.AtKey {
			line, col = d.KeyPos(v.Pointer)
		}
		l.Errorf(d.File, line, col, FieldPath(d, v.Pointer), "%s", v.Message)
	}
	return l
}
