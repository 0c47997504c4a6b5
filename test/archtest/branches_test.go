package archtest_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxBranches is the most branches (if, for, case, &&, ||) a function has
// before it is split into named steps or typed rule tables, as
// pkg/action/pipeline.go and pkg/deploy/ssa/order.go are, or says in its doc
// comment, on a line starting "Branches:", why it is better whole.
const maxBranches = 15

// TestBranchyFunctionsAreKnown: every function above maxBranches either says why
// in its doc comment or is listed in branchy.txt, the debt this test keeps from
// growing. A listed function that is split, or gone, must leave the list, so the
// list only shrinks.
func TestBranchyFunctionsAreKnown(t *testing.T) {
	known := readBranchy(t)
	seen := map[string]bool{}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || isModule(p)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, "zz_generated") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := branches(fd.Body)
			if n <= maxBranches || fd.Doc != nil && strings.Contains(fd.Doc.Text(), "Branches:") {
				continue
			}
			id := rel + " " + funcName(fd)
			seen[id] = true
			if !known[id] {
				t.Errorf("%s:%d: %s has %d branches (more than %d): split it into named steps or a rule table, or say why it is better whole on a doc comment line starting \"Branches:\"",
					rel, fset.Position(fd.Pos()).Line, funcName(fd), n, maxBranches)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id := range known {
		if !seen[id] {
			t.Errorf("branchy.txt lists %q, which is no longer above %d branches (or is gone): remove the line", id, maxBranches)
		}
	}
	t.Logf("%d functions above %d branches are listed in branchy.txt", len(known), maxBranches)
}

// isModule says whether dir holds a go.mod of its own (localcluster/, localnode/):
// another module, not this one's code.
func isModule(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

// readBranchy reads branchy.txt: "path function" per line, # comments.
func readBranchy(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open("branchy.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	known := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		known[line] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return known
}

// funcName is Name or Recv.Name (the receiver's type without its pointer or
// type parameters).
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fmt.Sprintf("%T.%s", typ, fd.Name.Name)
}

// branches counts the decision points of a body. Function literals in it are
// left out: they are steps handed on (a table's entries, a callback), read on
// their own.
func branches(body ast.Node) int {
	n := 0
	ast.Inspect(body, func(x ast.Node) bool {
		switch s := x.(type) {
		case *ast.FuncLit:
			return false
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			n++
		case *ast.CaseClause:
			if s.List != nil {
				n++
			}
		case *ast.CommClause:
			if s.Comm != nil {
				n++
			}
		case *ast.BinaryExpr:
			if s.Op == token.LAND || s.Op == token.LOR {
				n++
			}
		}
		return true
	})
	return n
}
