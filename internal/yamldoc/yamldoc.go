package yamldoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

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
	// root is the document's node tree while pos is not made: a document
	// converted without a problem indexes its positions the first time they
	// are asked for (most documents never are: a rendered manifest's objects
	// go to the cluster as they are).
	root *yaml.Node
	once sync.Once
}

// positions is the document's positions by JSON pointer, indexed from its
// node tree the first time.
func (d *Doc) positions() map[string]position {
	d.once.Do(func() {
		if d.root == nil {
			return
		}
		// The same walk that converted it, on a copy: what it makes is
		// made again, and dropped.
		c := &Doc{File: d.File, pos: map[string]position{}}
		var l diag.List
		c.convert(d.root, "", 0, 0, &l)
		d.pos, d.root = c.pos, nil
	})
	return d.pos
}

// value converts the node n of a document as convert does, without noting
// positions: a tree of plain values when convert would report nothing, else
// ok false (and d.nodes not to be trusted).
func (d *Doc) value(n *yaml.Node) (_ any, ok bool) {
	if d.nodes++; d.nodes > maxNodes {
		return nil, false
	}
	switch n.Kind {
	case yaml.AliasNode:
		return d.value(n.Alias)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.ShortTag() != "!!str") {
				return nil, false
			}
			if _, dup := m[k.Value]; dup {
				return nil, false
			}
			if m[k.Value], ok = d.value(v); !ok {
				return nil, false
			}
		}
		return m, true
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, c := range n.Content {
			if s[i], ok = d.value(c); !ok {
				return nil, false
			}
		}
		return s, true
	case yaml.ScalarNode:
		return scalar(n), true
	}
	return nil, false
}

// document converts the root node n of d: without positions when that finds
// no problem (they are indexed when asked for), else again noting them, to
// report the problems where they are.
func (d *Doc) document(n *yaml.Node, l *diag.List) {
	start := d.nodes
	if v, ok := d.value(n); ok {
		d.Value, d.root = v, n
		return
	}
	d.nodes = start
	d.Value = d.convert(n, "", 0, 0, l)
}

// aliasFree says whether the tree at n has no alias and at most maxNodes
// nodes: then no alias bomb can be in it, and bomb need not look.
func aliasFree(n *yaml.Node) bool {
	count := 0
	var walk func(n *yaml.Node) bool
	walk = func(n *yaml.Node) bool {
		if count++; count > maxNodes || n.Kind == yaml.AliasNode {
			return false
		}
		for _, c := range n.Content {
			if !walk(c) {
				return false
			}
		}
		return true
	}
	return walk(n)
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
	// Refuse an alias bomb before expanding anything: counting the values each
	// node expands to, once per node, takes time linear in the text.
	if !aliasFree(n) && d.bomb(n, &l) {
		return nil, l
	}
	d.document(n, &l)
	if l.HasFatal() {
		return nil, l
	}
	return d, l
}

// parserProblems are the messages of the YAML parser (as opposed to its scanner),
// whose line yaml.v3 reports counted from 0.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

var lineRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// syntaxDiag turns a YAML syntax error in data into a diagnostic. The parser gives
// a line but no column and drops what it was parsing, so for the common mistakes
// the text of the line supplies the column and a hint.
//
// Branches: one hint per common YAML mistake, each recognised from the parser's
// message and the line's text.
func syntaxDiag(file string, data []byte, err error) diag.List {
	var l diag.List
	msg := err.Error()
	line := 0
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if parserProblems[msg] {
		// The parser reports the line, counted from 0, of the construct it was
		// in; the scanner counts from 1. Only the scanner's is a 1-based line.
		line++
	}
	lines := strings.Split(string(data), "\n")
	if msg == "did not find expected key" || msg == "did not find expected '-' indicator" {
		// The line is where the block collection starts; the problem is the first
		// later line at or left of its indentation that is not one of its entries.
		line = strayLine(lines, line, msg != "did not find expected key")
	}
	text := ""
	if line > 0 && line <= len(lines) {
		text = lines[line-1]
	}
	col := 0
	if line > 0 {
		// The first character of the line, until a case below knows better.
		col = len(text) - len(strings.TrimLeft(text, " \t")) + 1
	}
	at := func(chars string) {
		if i := strings.IndexAny(text, chars); i >= 0 {
			col = i + 1
		}
	}
	// back moves to the nearest line at or before the current one holding one of
	// chars: the parser's line for an unclosed collection can be one past it.
	back := func(chars string) {
		for i := min(line, len(lines)); i >= 1; i-- {
			if strings.ContainsAny(lines[i-1], chars) {
				line, text = i, lines[i-1]
				at(chars)
				return
			}
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
		back("{")
		msg = "the flow mapping {...} that starts here is not closed: expected ',' or '}'"
	case msg == "did not find expected ',' or ']'":
		back("[")
		msg = "the flow list [...] that starts here is not closed: expected ',' or ']'"
	case msg == "mapping values are not allowed in this context":
		if i := strings.Index(text, ": "); i >= 0 {
			if j := strings.Index(text[i+2:], ": "); j >= 0 {
				col = i + 2 + j + 1
			}
		}
		msg += " (is this line indented differently from the keys next to it, or does an unquoted value hold ': '?)"
	}
	if m := anchorRE.FindStringSubmatch(msg); m != nil && line == 0 {
		for i, t := range lines {
			if j := strings.Index(t, "*"+m[1]); j >= 0 {
				line, col = i+1, j+1
				break
			}
		}
	}
	l.Errorf(file, line, col, "", "invalid YAML: %s", msg)
	return l
}

var anchorRE = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// bomb reports, located at the alias where the count passes maxNodes, whether
// the document expands to more than maxNodes values through aliases.
func (d *Doc) bomb(root *yaml.Node, l *diag.List) bool {
	sizes := map[*yaml.Node]int64{}
	var size func(n *yaml.Node, depth int) int64
	size = func(n *yaml.Node, depth int) int64 {
		if s, ok := sizes[n]; ok {
			return s
		}
		if depth > 10000 {
			return maxNodes + 1
		}
		sizes[n] = maxNodes + 1 // an alias cycle counts as too many
		var s int64 = 1
		switch n.Kind {
		case yaml.AliasNode:
			if n.Alias != nil {
				s += size(n.Alias, depth+1)
			}
		case yaml.MappingNode:
			for i := 1; i < len(n.Content); i += 2 {
				s += size(n.Content[i], depth+1)
			}
		default:
			for _, c := range n.Content {
				s += size(c, depth+1)
			}
		}
		s = min(s, maxNodes+1)
		sizes[n] = s
		return s
	}
	if size(root, 0) <= maxNodes {
		return false
	}
	// Find where: walk in document order, counting aliases whole.
	var total int64
	var find func(n *yaml.Node, ptr string) bool
	find = func(n *yaml.Node, ptr string) bool {
		if n.Kind == yaml.AliasNode {
			if total += sizes[n]; total > maxNodes {
				l.Errorf(d.File, n.Line, n.Column, FieldPath(d, ptr), "document expands to more than %d values through aliases (*%s)", maxNodes, n.Value)
				return true
			}
			return false
		}
		total++
		switch n.Kind {
		case yaml.MappingNode:
			d.pos[ptr] = position{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				if find(n.Content[i+1], ptr+"/"+escape(n.Content[i].Value)) {
					return true
				}
			}
		case yaml.SequenceNode:
			d.pos[ptr] = position{list: true}
			for i, c := range n.Content {
				if find(c, ptr+"/"+strconv.Itoa(i)) {
					return true
				}
			}
		}
		return false
	}
	if !find(root, "") {
		l.Errorf(d.File, root.Line, root.Column, "", "document expands to more than %d values through aliases", maxNodes)
	}
	return true
}

// strayLine returns the first line after start (1-based) that breaks the block
// collection starting there: one indented less than its entries but not back at
// the left margin, or one at its indentation that is not an entry (a list item
// in a mapping, a key in a list). It returns start when it finds none.
func strayLine(lines []string, start int, list bool) int {
	if start < 1 || start > len(lines) {
		return start
	}
	indentOf := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	ind := indentOf(lines[start-1])
	for i := start; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		in := indentOf(l)
		item := strings.HasPrefix(t, "- ") || t == "-"
		switch {
		case in > ind:
			continue
		case in == ind && item == list:
			continue
		case in < ind && in > 0 || in == ind:
			return i + 1
		case in == 0 && item != list:
			return i + 1
		}
		return start
	}
	return start
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
	pos := d.positions()
	for {
		if p, ok := pos[ptr]; ok {
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
	if p, ok := d.positions()[ptr]; ok && p.keyLine > 0 {
		return p.keyLine, p.keyCol
	}
	return d.Pos(ptr)
}

// Has reports whether a value exists at ptr.
func (d *Doc) Has(ptr string) bool {
	_, ok := d.positions()[ptr]
	return ok
}

// FieldPath renders a JSON pointer as a field path: spec.requires[0].name. Keys that
// are not plain identifiers are quoted: metadata.labels["app.kubernetes.io/name"].
func FieldPath(d *Doc, ptr string) string {
	if ptr == "" {
		return ""
	}
	var pos map[string]position
	if d != nil {
		pos = d.positions()
	}
	var b strings.Builder
	cur := ""
	for tok := range strings.SplitSeq(ptr[1:], "/") {
		parentList := pos[cur].list
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

// Decode decodes the document's value into out like DecodeInto, and turns a
// failure into a diagnostic located at the offending value: a number that the
// schema allows but the Go type cannot hold (an int beyond 64 bits) is the
// usual one. It reports whether decoding succeeded.
func (d *Doc) Decode(out any, l *diag.List) bool {
	err := d.DecodeInto(out)
	if err == nil {
		return true
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		found := strings.TrimPrefix(te.Value, "number ")
		if ptr, ok := d.find(d.Value, "", found); ok {
			d.Errorf(l, ptr, "%s is out of range or of the wrong type: expected %s", found, describeType(te.Type.String()))
			return false
		}
		l.Errorf(d.File, 0, 0, te.Field, "expected %s, found %s", describeType(te.Type.String()), te.Value)
		return false
	}
	l.Errorf(d.File, 0, 0, "", "cannot decode the document: %v", err)
	return false
}

// find returns the pointer of the first value (in key order) whose text is want.
func (d *Doc) find(v any, ptr, want string) (string, bool) {
	switch c := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(c))
		for k := range c {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if p, ok := d.find(c[k], ptr+"/"+escape(k), want); ok {
				return p, true
			}
		}
	case []any:
		for i, e := range c {
			if p, ok := d.find(e, ptr+"/"+strconv.Itoa(i), want); ok {
				return p, true
			}
		}
	case json.Number:
		return ptr, string(c) == want
	case string:
		return ptr, c == want
	}
	return "", false
}

func describeType(t string) string {
	switch t {
	case "int", "int64":
		return "an integer between -9223372036854775808 and 9223372036854775807"
	case "int32":
		return "an integer between -2147483648 and 2147483647"
	case "uint", "uint64":
		return "an integer between 0 and 18446744073709551615"
	case "uint32":
		return "an integer between 0 and 4294967295"
	case "float64", "float32":
		return "a number"
	}
	return "a value of Go type " + t
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
