package check

import (
	"fmt"
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
var (
	objectEnv = sync.OnceValues(func() (*cel.Env, error) {
		return cel.NewEnv(cel.Variable("object", cel.MapType(cel.StringType, cel.DynType)), ext.Strings())
	})
	objectsEnv = sync.OnceValues(func() (*cel.Env, error) {
		return cel.NewEnv(cel.Variable("objects", cel.ListType(cel.MapType(cel.StringType, cel.DynType))), ext.Strings())
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
		return nil, iss.Err()
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, fmt.Errorf("the expression yields %s, expected bool", t)
	}
	return env.Program(ast, cel.CostLimit(costLimit), cel.InterruptCheckFrequency(100))
}
