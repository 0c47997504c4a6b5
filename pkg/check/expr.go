package check

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
)

// costLimit bounds one evaluation, so an expression over a very long list of
// objects cannot spin.
const costLimit = 10_000_000

// The CEL environments of expression checks: one variable each, `object` (a map)
// for a check that names its object, `objects` (a list of maps) for one that does
// not. Using the other variable is a compile error, caught when the plugin loads.
// Optional field selection (object.?status.?readyReplicas.orValue(0)) reads fields
// that may not be set yet.
var (
	objectEnv = sync.OnceValues(func() (*cel.Env, error) {
		return cel.NewEnv(cel.Variable("object", cel.MapType(cel.StringType, cel.DynType)), ext.Strings(), cel.OptionalTypes())
	})
	objectsEnv = sync.OnceValues(func() (*cel.Env, error) {
		return cel.NewEnv(cel.Variable("objects", cel.ListType(cel.MapType(cel.StringType, cel.DynType))), ext.Strings(), cel.OptionalTypes())
	})
)

// CompileExpression compiles an expression check's CEL expression: over `object`
// when named (the check names one object), else over `objects`. It fails unless the
// expression is valid CEL over that variable and yields a bool.
func CompileExpression(expr string, named bool) (cel.Program, error) {
	envf := objectsEnv
	if named {
		envf = objectEnv
	}
	env, err := envf()
	if err != nil {
		return nil, fmt.Errorf("create the CEL environment: %w", err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, issues(iss)
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, fmt.Errorf("the expression yields %s, expected bool", t)
	}
	return env.Program(ast, cel.CostLimit(costLimit), cel.InterruptCheckFrequency(100))
}

// issues turns CEL's compile errors, which span lines to draw a caret under the
// expression, into one line: diagnostics are one line each.
func issues(iss *cel.Issues) error {
	var msgs []string
	for _, e := range iss.Errors() {
		at := fmt.Sprintf("column %d", e.Location.Column()+1)
		if e.Location.Line() > 1 {
			at = fmt.Sprintf("line %d, %s", e.Location.Line(), at)
		}
		msgs = append(msgs, e.Message+" ("+at+")")
	}
	if len(msgs) == 0 {
		return iss.Err()
	}
	return errors.New(strings.Join(msgs, "; "))
}
