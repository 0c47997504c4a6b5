package yamldoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kubeplug/kubeplug/pkg/diag"
)

// maxNodes bounds how many values a document may expand to through aliases, so a
// "billion laughs" document is an error rather than an out-of-memory.
const maxNodes = 1 << 20

// Doc is a parsed document: its plain value and the positions of its parts.
type Doc struct {
	// File is the name used in diagnostics.
	File string
	// Value is the document as plain Go values: map[string]any, []any, string,
	// json.Number, bool and nil.
	Value any

	pos   map[string]position // by JSON pointer
	nodes int
}

type position struct {
	keyLine, keyCol int // the key's position, 0 for the root and list items
	line, col       int // the value's position
	list            bool
}

// Parse parses one YAML document. An empty document is an empty mapping. Problems are
// returned as diagnostics naming file, line and column.
func Parse(file string, data []byte) (*Doc, diag.List) {
	d := &Doc{File: file, pos: map[string]position{}}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			d.Value = map[string]any{}
			d.pos[""] = position{line: 1, col: 1}
			return d, nil
		}
		return nil, syntaxDiag(file, data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		var l diag.List
		l.Errorf(file, extra.Line, extra.Column, "", "expected one YAML document, found more (a '---' separator)")
		return nil, l
	} else if !errors.Is(err, io.EOF) {
		return nil, syntaxDiag(file, data, err)
	}
	var l diag.List
	n := &root
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	d.Value = d.convert(n, "", 0, 0, &l)
	if l.HasFatal() {
		return nil, l
	}
	return d, l
}

var lineRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// syntaxDiag turns a YAML syntax error in data into a diagnostic. The parser gives
// a line but no column and drops what it was parsing, so for the common mistakes
// the text of the line supplies the column and a hint.
func syntaxDiag(file string, data []byte, err error) diag.List {
	var l diag.List
	msg := err.Error()
	line := 0
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	col := 0
	if line > 0 {
		col = 1
	}
	text := ""
	if lines := strings.Split(string(data), "\n"); line > 0 && line <= len(lines) {
		text = lines[line-1]
	}
	at := func(chars string) {
		if i := strings.IndexAny(text, chars); i >= 0 {
			col = i + 1
		}
	}
	indent := text[:len(text)-len(strings.TrimLeft(text, " \t"))]
	switch {
	case strings.Contains(indent, "\t"):
		at("\t")
		msg += " (a tab indents this line; YAML indents with spaces only)"
	case msg == "found unexpected end of stream":
		at(`"'`)
		msg = "the quoted string that starts here is never closed"
	case msg == "did not find expected ',' or '}'":
		at("{")
		msg = "the flow mapping {...} that starts here is not closed: expected ',' or '}'"
	case msg == "did not find expected ',' or ']'":
		at("[")
		msg = "the flow list [...] that starts here is not closed: expected ',' or ']'"
	case msg == "mapping values are not allowed in this context":
		msg += " (is this line indented differently from the keys next to it, or does an unquoted value hold ': '?)"
	}
	l.Errorf(file, line, col, "", "invalid YAML: %s", msg)
	return l
}

func (d *Doc) convert(n *yaml.Node, ptr string, keyLine, keyCol int, l *diag.List) any {
	d.nodes++
	if d.nodes > maxNodes {
		if d.nodes == maxNodes+1 {
			l.Errorf(d.File, n.Line, n.Column, FieldPath(d, ptr), "document expands to more than %d values (aliases?)", maxNodes)
		}
		return nil
	}
	p := position{keyLine: keyLine, keyCol: keyCol, line: n.Line, col: n.Column}
	switch n.Kind {
	case yaml.AliasNode:
		d.pos[ptr] = p
		v := d.convert(n.Alias, ptr, keyLine, keyCol, l)
		d.pos[ptr] = p
		return v
	case yaml.MappingNode:
		d.pos[ptr] = p
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.ShortTag() != "!!str") {
				if k.Tag == "!!merge" {
					l.Errorf(d.File, k.Line, k.Column, FieldPath(d, ptr), "merge keys (<<) are not supported; repeat the fields instead")
				} else {
					l.Errorf(d.File, k.Line, k.Column, FieldPath(d, ptr), "expected a string key, found %s", describe(k))
				}
				continue
			}
			child := ptr + "/" + escape(k.Value)
			if _, dup := m[k.Value]; dup {
				l.Errorf(d.File, k.Line, k.Column, FieldPath(d, child), "duplicate key %q, first set on line %d", k.Value, d.pos[child].keyLine)
				continue
			}
			m[k.Value] = d.convert(v, child, k.Line, k.Column, l)
		}
		return m
	case yaml.SequenceNode:
		p.list = true
		d.pos[ptr] = p
		s := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			s = append(s, d.convert(c, ptr+"/"+strconv.Itoa(i), 0, 0, l))
		}
		return s
	case yaml.ScalarNode:
		d.pos[ptr] = p
		return scalar(n)
	default:
		d.pos[ptr] = p
		l.Errorf(d.File, n.Line, n.Column, FieldPath(d, ptr), "unsupported YAML node")
		return nil
	}
}

func scalar(n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if n.Decode(&b) == nil {
			return b
		}
	case "!!int":
		var i int64
		if n.Decode(&i) == nil {
			return json.Number(strconv.FormatInt(i, 10))
		}
		var u uint64
		if n.Decode(&u) == nil {
			return json.Number(strconv.FormatUint(u, 10))
		}
	case "!!float":
		var f float64
		if n.Decode(&f) == nil {
			if s := strconv.FormatFloat(f, 'g', -1, 64); s != "NaN" && !strings.Contains(s, "Inf") {
				return json.Number(s)
			}
		}
	}
	return n.Value
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%s %q", strings.TrimPrefix(n.ShortTag(), "!!"), n.Value)
}

func escape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

func unescape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}

// Pointer joins tokens into a JSON pointer.
func Pointer(tokens ...string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteString("/" + escape(t))
	}
	return b.String()
}

// Pos returns the line and column of the value at ptr (a JSON pointer). When ptr does
// not exist, it returns the position of its nearest existing ancestor.
func (d *Doc) Pos(ptr string) (line, col int) {
	for {
		if p, ok := d.pos[ptr]; ok {
			return p.line, p.col
		}
		if ptr == "" {
			return 0, 0
		}
		ptr = ptr[:strings.LastIndexByte(ptr, '/')]
	}
}

// KeyPos returns the position of the key that holds ptr, or the value's position for
// list items and the root.
func (d *Doc) KeyPos(ptr string) (line, col int) {
	if p, ok := d.pos[ptr]; ok && p.keyLine > 0 {
		return p.keyLine, p.keyCol
	}
	return d.Pos(ptr)
}

// Has reports whether a value exists at ptr.
func (d *Doc) Has(ptr string) bool {
	_, ok := d.pos[ptr]
	return ok
}

// FieldPath renders a JSON pointer as a field path: spec.requires[0].name. Keys that
// are not plain identifiers are quoted: metadata.labels["app.kubernetes.io/name"].
func FieldPath(d *Doc, ptr string) string {
	if ptr == "" {
		return ""
	}
	var b strings.Builder
	cur := ""
	for tok := range strings.SplitSeq(ptr[1:], "/") {
		parentList := false
		if d != nil {
			parentList = d.pos[cur].list
		}
		cur += "/" + tok
		key := unescape(tok)
		switch {
		case parentList:
			b.WriteString("[" + key + "]")
		case plainKey(key):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(key)
		default:
			b.WriteString("[" + strconv.Quote(key) + "]")
		}
	}
	return b.String()
}

func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		ok := r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !ok {
			return false
		}
	}
	return true
}

// Errorf appends a fatal diagnostic located at the value at ptr.
func (d *Doc) Errorf(l *diag.List, ptr, format string, args ...any) {
	line, col := d.Pos(ptr)
	l.Errorf(d.File, line, col, FieldPath(d, ptr), format, args...)
}

// Warnf appends a warning located at the value at ptr.
func (d *Doc) Warnf(l *diag.List, ptr, format string, args ...any) {
	line, col := d.Pos(ptr)
	l.Warnf(d.File, line, col, FieldPath(d, ptr), format, args...)
}

// DecodeInto decodes the document's value into out (a pointer to a Go type) with
// unknown fields refused. Call it after the document passed its schema; an error here
// means the schema and the Go type disagree.
func (d *Doc) DecodeInto(out any) error {
	raw, err := json.Marshal(d.Value)
	if err != nil {
		return fmt.Errorf("encode %s: %w", d.File, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("decode %s: %w", d.File, err)
	}
	return nil
}
