package check

import "github.com/kubeplug/kubeplug/pkg/expr"

// compile compiles an expression check's CEL expression: over `object` when the
// check names its object, else over `objects`, the list of every object of the kind
// (package expr holds both environments and the cost limit). It fails unless the
// expression is valid CEL over that variable and yields a bool; the plugin loader
// compiled it the same way already.
func compile(src string, named bool) (*expr.Program, error) {
	if named {
		return expr.Object.Compile(src)
	}
	return expr.Objects.Compile(src)
}
