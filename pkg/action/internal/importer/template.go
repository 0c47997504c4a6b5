package importer

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/Masterminds/sprig/v3"
)

// kubeplugFuncs are the names of the functions kubeplug's templates have: sprig's
// less those that read the host, plus toYaml and required (see
// pkg/runtime/declarative). A source template calling any other function cannot
// be rendered by kubeplug.
var kubeplugFuncs = func() template.FuncMap {
	f := sprig.TxtFuncMap()
	for _, name := range []string{"env", "expandenv", "getHostByName"} {
		delete(f, name)
	}
	f["toYaml"] = func(any) string { return "" }
	f["required"] = func(string, any) any { return nil }
	return f
}()

// configRef is one field of the source tool's own data a template reads (kube-aws'
// .Config.X), and where the translated template reads it instead.
type configRef struct {
	Source, Target string
	// List is set when the template ranges over the field, so that its default
	// must be a list.
	List bool
}

// templateRewrite translates a source template whose data is {Values, <root>}
// into a kubeplug template: .Values stays, <root>.<path> is read from rename[path]
// when named there (.Config.ClusterName -> .Cluster.Metadata.Name) and from
// .Values.<valuesKey>.<path> otherwise. It returns the new text, the refs it
// rewrote, and an error when the text is no template kubeplug can render (an
// unknown function, a syntax error).
func templateRewrite(text, root, valuesKey string, rename map[string]string) (string, []configRef, error) {
	if !strings.Contains(text, "{{") {
		return text, nil, nil
	}
	t, err := template.New("t").Funcs(kubeplugFuncs).Parse(text)
	if err != nil {
		return "", nil, fmt.Errorf("not a template kubeplug renders: %s", strings.TrimPrefix(err.Error(), "template: t:"))
	}
	var refs []configRef
	seen := map[string]bool{}
	walkFields(t.Root, false, func(ident []string, ranged bool) {
		if len(ident) < 2 || ident[0] != root {
			return
		}
		src := strings.Join(ident[1:], ".")
		if seen[src] {
			return
		}
		seen[src] = true
		target, ok := rename[src]
		if !ok {
			target = ".Values." + valuesKey + "." + src
		}
		refs = append(refs, configRef{Source: "." + root + "." + src, Target: target, List: ranged})
	})
	if len(refs) == 0 {
		return text, nil, nil
	}
	// Longest first, so .Config.A.B is rewritten before .Config.A.
	slices.SortFunc(refs, func(a, b configRef) int { return len(b.Source) - len(a.Source) })
	out := actionRE.ReplaceAllStringFunc(text, func(action string) string {
		for _, r := range refs {
			action = regexp.MustCompile(regexp.QuoteMeta(r.Source)+`\b`).ReplaceAllString(action, r.Target)
		}
		return action
	})
	slices.SortFunc(refs, func(a, b configRef) int { return strings.Compare(a.Source, b.Source) })
	return out, refs, nil
}

// actionRE matches one template action.
var actionRE = regexp.MustCompile(`(?s)\{\{.*?\}\}`)

// walkFields calls f with the identifiers of every field chain in a parse tree,
// and whether a range iterates over it.
//
// Branches: one case per kind of node of a template parse tree, as
// text/template/parse defines them.
func walkFields(n parse.Node, ranged bool, f func([]string, bool)) {
	switch t := n.(type) {
	case *parse.FieldNode:
		f(t.Ident, ranged)
	case *parse.ChainNode:
		walkFields(t.Node, ranged, f)
	case *parse.ListNode:
		if t != nil {
			for _, c := range t.Nodes {
				walkFields(c, false, f)
			}
		}
	case *parse.ActionNode:
		walkFields(t.Pipe, false, f)
	case *parse.PipeNode:
		if t != nil {
			for _, c := range t.Cmds {
				walkFields(c, ranged && len(t.Cmds) == 1, f)
			}
		}
	case *parse.CommandNode:
		for _, a := range t.Args {
			walkFields(a, ranged && len(t.Args) == 1, f)
		}
	case *parse.IfNode:
		walkBranch(&t.BranchNode, false, f)
	case *parse.RangeNode:
		walkBranch(&t.BranchNode, true, f)
	case *parse.WithNode:
		walkBranch(&t.BranchNode, false, f)
	case *parse.TemplateNode:
		walkFields(t.Pipe, false, f)
	}
}

func walkBranch(b *parse.BranchNode, ranged bool, f func([]string, bool)) {
	walkFields(b.Pipe, ranged, f)
	walkFields(b.List, false, f)
	walkFields(b.ElseList, false, f)
}

// setPath sets a dotted path in a tree of maps to v, making the maps on the way,
// without replacing a value already there.
func setPath(m map[string]any, path string, v any) {
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			if m[k] != nil {
				return
			}
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	if _, ok := m[keys[len(keys)-1]]; !ok {
		m[keys[len(keys)-1]] = v
	}
}
