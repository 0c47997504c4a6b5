package declarative

import (
	"fmt"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"
)

// Reads of another plugin's values are strict. A template that reads
// .Plugins.NAME.Values.KEY of a plugin the cluster does not have, or a key the
// plugin's values lack (a misspelling), fails naming both, where a missing
// .Values.x renders as nothing (Helm's way, and what `default` relies on).
// A plugin's values are a contract between two authors: an empty string in a
// flag or a file is the silent loss this prevents.
//
// A template says a read is optional by asking about it: inside the condition
// of `if` or `with`, as an argument of `index` (which answers nothing for a
// missing key), or in a pipeline with `default`, `empty`, `coalesce`, `hasKey`
// or `optional` (which returns its argument: `{{ optional .Plugins.x.Values.y }}`).
//
// It works on the parsed template: every field chain rooted at .Plugins
// (`.Plugins.a.Values.b`, `$.Plugins...`, `(index .Plugins "a-b").Values.c`)
// outside those places is replaced by a call of strictFunc, which walks the
// same path and fails at the first step that is missing.

// strictFunc is the hidden function reads are rewritten to.
const strictFunc = "kubeplug_plugin_value"

// optionalFuncs are the functions whose pipeline makes a .Plugins read optional.
var optionalFuncs = map[string]bool{"default": true, "empty": true, "coalesce": true, "hasKey": true, "optional": true}

// missingValueError is a strict read of a value that is not there.
type missingValueError struct {
	msg, read string // the message; what was read (.Plugins.a.Values.b)
	noPlugin  bool   // the plugin itself is missing
}

func (e *missingValueError) Error() string { return e.msg }

// strictPlugins rewrites the .Plugins reads of t's trees (see above).
func strictPlugins(t *parse.Tree, text string) {
	if t == nil || t.Root == nil {
		return
	}
	w := walker{text: text}
	w.list(t.Root, false)
}

// walker rewrites one template's tree; text is its source, for positions.
type walker struct{ text string }

func (w walker) list(l *parse.ListNode, optional bool) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		w.node(n, optional)
	}
}

func (w walker) node(n parse.Node, optional bool) {
	switch n := n.(type) {
	case *parse.ActionNode:
		w.pipe(n.Pipe, optional)
	case *parse.IfNode:
		w.pipe(n.Pipe, true)
		w.list(n.List, optional)
		w.list(n.ElseList, optional)
	case *parse.WithNode:
		w.pipe(n.Pipe, true)
		w.list(n.List, optional)
		w.list(n.ElseList, optional)
	case *parse.RangeNode:
		w.pipe(n.Pipe, optional)
		w.list(n.List, optional)
		w.list(n.ElseList, optional)
	case *parse.ListNode:
		w.list(n, optional)
	case *parse.TemplateNode:
		w.pipe(n.Pipe, optional)
	}
}

func (w walker) pipe(p *parse.PipeNode, optional bool) {
	if p == nil {
		return
	}
	for _, c := range p.Cmds {
		if len(c.Args) > 0 {
			if id, ok := c.Args[0].(*parse.IdentifierNode); ok && optionalFuncs[id.Ident] {
				optional = true
			}
		}
	}
	for _, c := range p.Cmds {
		argsOptional := optional
		if len(c.Args) > 0 {
			if id, ok := c.Args[0].(*parse.IdentifierNode); ok && id.Ident == "index" {
				argsOptional = true
			}
		}
		for i, a := range c.Args {
			switch a := a.(type) {
			case *parse.PipeNode:
				w.pipe(a, optional)
			case *parse.ChainNode:
				if pn, ok := a.Node.(*parse.PipeNode); ok {
					w.pipe(pn, optional)
				}
			}
			if argsOptional {
				continue
			}
			if path, ok := pluginPath(a); ok {
				c.Args[i] = strictCall(w.start(a), path)
			}
		}
	}
}

// start returns where the read n begins in the text: the parser places a
// field chain at its second field and a chain at its first field after the
// parenthesis.
func (w walker) start(n parse.Node) parse.Pos {
	pos := n.Position()
	switch n := n.(type) {
	case *parse.FieldNode, *parse.VariableNode:
		for _, prefix := range []string{"$.Plugins", ".Plugins"} {
			if p := int(pos) - len(prefix); p >= 0 && int(pos) <= len(w.text) && w.text[p:pos] == prefix {
				return parse.Pos(p)
			}
		}
	case *parse.ChainNode:
		if p, ok := n.Node.(*parse.PipeNode); ok && len(p.Cmds) > 0 && len(p.Cmds[0].Args) > 0 {
			return p.Cmds[0].Args[0].Position()
		}
	}
	return pos
}

// pluginPath returns the path below .Plugins that n reads, when n is a field
// chain rooted at .Plugins.
func pluginPath(n parse.Node) ([]string, bool) {
	switch n := n.(type) {
	case *parse.FieldNode:
		if len(n.Ident) > 1 && n.Ident[0] == "Plugins" {
			return n.Ident[1:], true
		}
	case *parse.VariableNode:
		if len(n.Ident) > 2 && n.Ident[0] == "$" && n.Ident[1] == "Plugins" {
			return n.Ident[2:], true
		}
	case *parse.ChainNode:
		return chainPath(n)
	}
	return nil, false
}

// chainPath returns the path below .Plugins that (index .Plugins "a-b" ...).Values.c reads.
func chainPath(n *parse.ChainNode) ([]string, bool) {
	p, ok := n.Node.(*parse.PipeNode)
	if !ok || len(p.Cmds) != 1 || len(p.Decl) > 0 {
		return nil, false
	}
	args := p.Cmds[0].Args
	if len(args) < 3 {
		return nil, false
	}
	if id, ok := args[0].(*parse.IdentifierNode); !ok || id.Ident != "index" {
		return nil, false
	}
	if !isPluginsRoot(args[1]) {
		return nil, false
	}
	var path []string
	for _, a := range args[2:] {
		s, ok := a.(*parse.StringNode)
		if !ok {
			return nil, false
		}
		path = append(path, s.Text)
	}
	return append(path, n.Field...), true
}

// isPluginsRoot says whether n is .Plugins or $.Plugins itself.
func isPluginsRoot(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.FieldNode:
		return len(n.Ident) == 1 && n.Ident[0] == "Plugins"
	case *parse.VariableNode:
		return len(n.Ident) == 2 && n.Ident[0] == "$" && n.Ident[1] == "Plugins"
	}
	return false
}

// strictCall is `(kubeplug_plugin_value "a" "Values" "b")` at pos.
func strictCall(pos parse.Pos, path []string) parse.Node {
	id := parse.NewIdentifier(strictFunc).SetPos(pos)
	args := []parse.Node{id}
	for _, s := range path {
		args = append(args, &parse.StringNode{NodeType: parse.NodeString, Pos: pos, Quoted: fmt.Sprintf("%q", s), Text: s})
	}
	cmd := &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos, Args: args}
	return &parse.PipeNode{NodeType: parse.NodePipe, Pos: pos, Cmds: []*parse.CommandNode{cmd}}
}

// strictReads makes t's reads of another plugin's values strict when data has
// .Plugins (the values' defaults, for one, are rendered without).
func strictReads(t *template.Template, text string, data any) {
	m, ok := data.(map[string]any)
	if !ok {
		return
	}
	if plugins, ok := m["Plugins"]; ok {
		strictPlugins(t.Tree, text)
		t.Funcs(template.FuncMap{strictFunc: pluginValue(plugins)})
	}
}

// pluginValue returns the function strict reads call: it walks path from
// plugins (the data's .Plugins) and fails, naming the path, at the first step
// that is not there.
func pluginValue(plugins any) func(path ...string) (any, error) {
	return func(path ...string) (any, error) {
		v := reflect.ValueOf(plugins)
		for i, step := range path {
			for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) {
				if v.IsNil() {
					v = reflect.Value{}
					break
				}
				v = v.Elem()
			}
			var next reflect.Value
			switch {
			case !v.IsValid():
			case v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String:
				next = v.MapIndex(reflect.ValueOf(step).Convert(v.Type().Key()))
			case v.Kind() == reflect.Struct:
				next = v.FieldByName(step)
			}
			if !next.IsValid() {
				return nil, &missingValueError{msg: missingMessage(path, i), read: ".Plugins." + strings.Join(path, "."), noPlugin: i == 0}
			}
			v = next
		}
		if !v.IsValid() {
			return nil, nil
		}
		return v.Interface(), nil
	}
}

func missingMessage(path []string, i int) string {
	read := ".Plugins." + strings.Join(path, ".")
	const hint = "; say it is optional with `with`, `index`, `default` or `optional`"
	if i == 0 {
		return fmt.Sprintf("%s reads plugin %s, which is not in the cluster%s", read, path[0], hint)
	}
	if i >= 2 && path[1] == "Values" {
		return fmt.Sprintf("%s: plugin %s has no value %s%s", read, path[0], strings.Join(path[2:i+1], "."), hint)
	}
	return fmt.Sprintf("%s: plugin %s has no %s%s", read, path[0], strings.Join(path[1:i+1], "."), hint)
}
