package valuerefs

import (
	"slices"
	"strings"
	"text/template/parse"
)

// Ref is one reference to a value in a template.
type Ref struct {
	// Path is the value's path below .Values: ["image", "tag"] for
	// `.Values.image.tag`.
	Path []string
	// Line and Column locate the reference in the template's text, 1-based
	// (the column counts bytes).
	Line, Column int
	// Guarded says the template expects the value may be missing: the
	// reference is an argument of a function that handles that (default,
	// required, ...), or is tested by the condition of an if or with (alone or
	// under and, or, not), or lies inside an if or with whose condition
	// names it or a prefix of it.
	Guarded bool
}

// String returns the reference as a template writes it: .Values.a.b.
func (r Ref) String() string { return ".Values." + strings.Join(r.Path, ".") }

// guardFuncs are the functions whose arguments may be missing on purpose.
var guardFuncs = map[string]bool{
	"default": true, "required": true, "hasKey": true, "dig": true, "empty": true,
	"coalesce": true, "ternary": true, "kindIs": true, "typeIs": true,
}

// Find parses text as a template and returns its references to values, in the
// order they appear, guarded ones included. Function names are not checked (a
// chart's and a plugin's templates have different functions); a text that does
// not parse returns the parser's error, which rendering reports better.
func Find(text string) ([]Ref, error) {
	if !strings.Contains(text, "{{") {
		return nil, nil
	}
	t := parse.New("t")
	t.Mode = parse.SkipFuncCheck
	if _, err := t.Parse(text, "", "", map[string]*parse.Tree{}); err != nil {
		return nil, err
	}
	w := &walker{text: text}
	if t.Root != nil {
		w.list(t.Root, scope{dotRoot: true})
	}
	// .Values itself is recorded only for index and hasKey.
	return slices.DeleteFunc(w.refs, func(r Ref) bool { return len(r.Path) == 0 }), nil
}

// scope is what a node sees: whether its dot is the template's root, whether
// its pipeline is guarded, and the value paths enclosing ifs and withs tested.
type scope struct {
	dotRoot bool
	guarded bool
	// cond says the pipeline is (part of) the condition of an if or with,
	// where a bare reference tests presence.
	cond   bool
	tested [][]string
}

// presenceFuncs combine presence tests in a condition.
var presenceFuncs = map[string]bool{"and": true, "or": true, "not": true}

func (s scope) with(tested [][]string) scope {
	if len(tested) == 0 {
		return s
	}
	s.tested = append(append([][]string(nil), s.tested...), tested...)
	return s
}

type walker struct {
	text string
	refs []Ref
}

func (w *walker) list(l *parse.ListNode, s scope) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		w.node(n, s)
	}
}

func (w *walker) node(n parse.Node, s scope) {
	switch n := n.(type) {
	case *parse.ActionNode:
		w.pipe(n.Pipe, s)
	case *parse.IfNode:
		c := s
		c.cond = true
		tested := w.pipe(n.Pipe, c)
		w.list(n.List, s.with(tested))
		w.list(n.ElseList, s.with(tested))
	case *parse.WithNode:
		c := s
		c.cond = true
		tested := w.pipe(n.Pipe, c)
		body := s.with(tested)
		body.dotRoot = false
		w.list(n.List, body)
		w.list(n.ElseList, s.with(tested))
	case *parse.RangeNode:
		// Ranging over a missing list renders nothing: that is the typo this
		// package is for, so the range's pipeline is not guarded.
		w.pipe(n.Pipe, s)
		body := s
		body.dotRoot = false
		w.list(n.List, body)
		w.list(n.ElseList, s)
	case *parse.TemplateNode:
		w.pipe(n.Pipe, s)
	case *parse.ListNode:
		w.list(n, s)
	}
}

// pipe records the references in p and returns the paths it tests: every
// reference, and `hasKey X "k"` as X's path plus k.
func (w *walker) pipe(p *parse.PipeNode, s scope) [][]string {
	if p == nil {
		return nil
	}
	for _, c := range p.Cmds {
		if id, ok := firstIdent(c); ok && guardFuncs[id] {
			s.guarded = true
		}
	}
	cond := s.cond
	s.cond = false
	var tested [][]string
	for _, c := range p.Cmds {
		w.command(c, s, cond, &tested)
	}
	return tested
}

// command records the references in c, a command of a pipeline in scope s
// (a condition's when cond), and adds the paths it tests to tested.
func (w *walker) command(c *parse.CommandNode, s scope, cond bool, tested *[][]string) {
	id, isFunc := firstIdent(c)
	cs := s
	if cond && (!isFunc || presenceFuncs[id]) {
		// {{ if .Values.x }}, {{ if and .Values.a (not .Values.b) }}:
		// tests whether the value is there. Other functions of a
		// condition (eq, semverCompare, ...) use the value.
		cs.guarded, cs.cond = true, true
	}
	var first []string // the path of the command's first reference argument
	for i, a := range c.Args {
		path := w.arg(a, cs, tested)
		if path == nil {
			continue
		}
		if first == nil && i == 1 {
			first = path
		}
	}
	if first == nil || len(c.Args) <= 2 {
		return
	}
	keys := stringArgs(c.Args[2:])
	switch {
	case id == "hasKey" && len(keys) == 1:
		*tested = append(*tested, append(append([]string(nil), first...), keys...))
	case id == "index" && keys != nil:
		// index .Values "a" "b" is .Values.a.b.
		last := &w.refs[len(w.refs)-1]
		if slices.Equal(last.Path, first) {
			last.Path = append(append([]string(nil), first...), keys...)
			last.Guarded = w.guarded(last.Path, s)
			*tested = append(*tested, last.Path)
		}
	}
}

// arg records a reference argument and returns its path (nil for anything
// else); references inside nested pipelines are recorded too.
func (w *walker) arg(a parse.Node, s scope, tested *[][]string) []string {
	var path []string
	switch a := a.(type) {
	case *parse.FieldNode:
		if s.dotRoot && len(a.Ident) >= 1 && a.Ident[0] == "Values" {
			path = a.Ident[1:]
		}
	case *parse.VariableNode:
		if len(a.Ident) >= 2 && a.Ident[0] == "$" && a.Ident[1] == "Values" {
			path = a.Ident[2:]
		}
	case *parse.PipeNode:
		*tested = append(*tested, w.pipe(a, s)...)
		return nil
	case *parse.ChainNode:
		if p, ok := a.Node.(*parse.PipeNode); ok {
			*tested = append(*tested, w.pipe(p, s)...)
		}
		return nil
	default:
		return nil
	}
	if path == nil {
		return nil
	}
	// .Values itself is recorded for index and hasKey, and never reported:
	// guarded() says so for an empty path.
	path = append([]string{}, path...)
	line, col := w.position(start(w.text, a))
	w.refs = append(w.refs, Ref{Path: path, Line: line, Column: col, Guarded: w.guarded(path, s)})
	*tested = append(*tested, path)
	return path
}

func (w *walker) guarded(path []string, s scope) bool {
	if s.guarded || len(path) == 0 {
		return true
	}
	for _, t := range s.tested {
		if len(t) > 0 && len(t) <= len(path) && slices.Equal(t, path[:len(t)]) {
			return true
		}
	}
	return false
}

// start returns where n's text begins: the parser places a field chain at
// its last element.
func start(text string, n parse.Node) parse.Pos {
	s := n.String()
	p := int(n.Position())
	end := min(len(text), p+len(s))
	if i := strings.LastIndex(text[:end], s); i >= 0 {
		return parse.Pos(i)
	}
	return n.Position()
}

// position turns a byte offset into a 1-based line and column.
func (w *walker) position(p parse.Pos) (line, col int) {
	off := min(int(p), len(w.text))
	before := w.text[:off]
	line = strings.Count(before, "\n") + 1
	col = off - strings.LastIndexByte(before, '\n')
	return line, col
}

func firstIdent(c *parse.CommandNode) (string, bool) {
	if len(c.Args) == 0 {
		return "", false
	}
	id, ok := c.Args[0].(*parse.IdentifierNode)
	if !ok {
		return "", false
	}
	return id.Ident, true
}

// stringArgs returns the texts of nodes that are all string constants, or nil.
func stringArgs(ns []parse.Node) []string {
	var out []string
	for _, n := range ns {
		s, ok := n.(*parse.StringNode)
		if !ok {
			return nil
		}
		out = append(out, s.Text)
	}
	return out
}
