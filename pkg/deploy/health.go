package deploy

import (
	"fmt"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// HealthCheck is a plugin's readiness condition for one kind, beyond kstatus: a CEL
// expression over `object` (the live object as a map) that must be true.
type HealthCheck struct {
	// APIVersion restricts the check to one API version ("apps/v1"); empty matches
	// every version of Kind.
	APIVersion string
	Kind       string
	Expression string
}

// healthEnv is the CEL environment of health expressions: one variable, object.
var healthEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(cel.Variable("object", cel.MapType(cel.StringType, cel.DynType)), ext.Strings())
})

// CompileHealth checks that a health expression is valid CEL yielding a bool, so a
// plugin with a broken one is refused when it is loaded rather than at deploy time.
func CompileHealth(expr string) (cel.Program, error) {
	env, err := healthEnv()
	if err != nil {
		return nil, fmt.Errorf("create the CEL environment: %w", err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
		return nil, fmt.Errorf("the expression yields %s, expected bool", ast.OutputType())
	}
	prg, err := env.Program(ast)
	if err != nil {
		return nil, err
	}
	return prg, nil
}

// health is a plugin's compiled checks.
type health []compiledCheck

type compiledCheck struct {
	HealthCheck
	prg cel.Program
}

func compileHealth(checks []HealthCheck) (health, error) {
	var out health
	for _, c := range checks {
		prg, err := CompileHealth(c.Expression)
		if err != nil {
			return nil, fmt.Errorf("health expression for %s %q: %w", c.Kind, c.Expression, err)
		}
		out = append(out, compiledCheck{HealthCheck: c, prg: prg})
	}
	return out, nil
}

// failing returns the first check for o's kind whose expression is not true, with
// why; "" when every check holds. An expression that cannot be evaluated (a missing
// field) counts as false: the field may not be set yet.
func (h health) failing(o *unstructured.Unstructured) (string, string) {
	for _, c := range h {
		if c.Kind != o.GetKind() || (c.APIVersion != "" && c.APIVersion != o.GetAPIVersion()) {
			continue
		}
		v, _, err := c.prg.Eval(map[string]any{"object": o.Object})
		if err != nil {
			return c.Expression, "cannot be evaluated (" + err.Error() + ")"
		}
		if b, ok := v.Value().(bool); !ok || !b {
			return c.Expression, "is false"
		}
	}
	return "", ""
}
