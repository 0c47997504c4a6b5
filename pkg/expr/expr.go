package expr

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
)

// CostLimit bounds the work of one evaluation, in CEL's cost units (roughly one
// per value visited or operator applied). Every program [Env.Compile] returns
// runs under it, whoever evaluates it: a deploy wait re-evaluating a health
// expression every poll, a check listing every object of a kind, a node agent
// deciding whether a hook runs at boot. Expressions come from plugins, and a
// quadratic comprehension over a long list must fail as "cost limit exceeded"
// instead of holding a deploy or a boot. Ten million units allow about a million
// steps of a comprehension (seconds of CPU at worst), far beyond what a readiness
// test over thousands of objects needs (a pass over ten thousand objects reading a
// few fields of each costs under a hundred thousand), while a quadratic pass over
// them, or a substring search of a long string in another, is refused.
const CostLimit = 10_000_000

// interruptEvery is how many comprehension iterations pass between checks of the
// evaluation context, so that canceling a check stops a long evaluation.
const interruptEvery = 100

// objectType is one Kubernetes object as CEL sees it: its JSON as a map.
var objectType = cel.MapType(cel.StringType, cel.DynType)

// The environments of expressions over Kubernetes objects. Using the variable of
// the other one is a compile error, caught when the plugin loads.
var (
	// Object declares `object`, one live object as a map: health expressions and
	// expression checks that name their object.
	Object = NewEnv(cel.Variable("object", objectType))
	// Objects declares `objects`, a list of live objects as maps: expression checks
	// that name no object and so see every object of their kind.
	Objects = NewEnv(cel.Variable("objects", cel.ListType(objectType)))
)

// Env is a CEL environment kubeplug compiles expressions in. It is built on first
// use and safe for concurrent use.
type Env struct {
	env func() (*cel.Env, error)
}

// NewEnv returns an environment with kubeplug's common options (the strings
// extension and optional types) and opts, which declare its variables and any
// functions of its own. It is for packages that own a kind of expression, like
// hook conditions; health expressions and checks use [Object] and [Objects].
func NewEnv(opts ...cel.EnvOption) *Env {
	all := append([]cel.EnvOption{ext.Strings(), cel.OptionalTypes()}, opts...)
	return &Env{env: sync.OnceValues(func() (*cel.Env, error) { return cel.NewEnv(all...) })}
}

// Compile parses and type-checks src and insists that it yields a bool (or dyn,
// which evaluation checks). A syntax or type error is an *Error listing every
// issue with its position; a result of another type is a *NotBoolError.
func (e *Env) Compile(src string) (*Program, error) {
	env, err := e.env()
	if err != nil {
		return nil, fmt.Errorf("create the CEL environment: %w", err)
	}
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, issues(iss)
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, &NotBoolError{Type: t.String()}
	}
	prg, err := env.Program(ast, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(interruptEvery))
	if err != nil {
		return nil, fmt.Errorf("prepare the CEL program: %w", err)
	}
	return &Program{ast: ast, prg: prg}, nil
}

// Program is a compiled expression, safe for concurrent evaluation.
type Program struct {
	ast *cel.Ast
	prg cel.Program
}

// AST is the checked expression, for callers that look for constructs worth a
// warning.
func (p *Program) AST() *cel.Ast { return p.ast }

// Eval evaluates the program with vars, a map from variable name to value (a Go
// value the environment declared: a map for object, a slice of maps for objects, a
// struct registered as a native type). It returns the evaluation error as CEL
// reports it, "cost limit exceeded" included, or a *NotBoolError for a dyn
// expression that did not yield a bool. Canceling ctx stops a long evaluation.
func (p *Program) Eval(ctx context.Context, vars map[string]any) (bool, error) {
	v, _, err := p.prg.ContextEval(ctx, vars)
	if err != nil {
		return false, err
	}
	b, ok := v.Value().(bool)
	if !ok {
		return false, &NotBoolError{Type: fmt.Sprint(v.Type())}
	}
	return b, nil
}

// NotBoolError is an expression whose result is not a bool: its declared type
// when it is compiled, the value's type when a dyn expression is evaluated.
type NotBoolError struct {
	// Type is CEL's name of the type, like int or string.
	Type string
}

func (e *NotBoolError) Error() string { return "the expression yields " + e.Type + ", expected bool" }

// Error is an expression that does not compile.
type Error struct {
	// Issues in the order CEL reports them; at least one.
	Issues []Issue
}

// Issue is one syntax or type error, at a 1-based line and column of the
// expression.
type Issue struct {
	Line, Column int
	Message      string
}

// Error is one line, "message (column 5)" or "message (line 2, column 5)" per
// issue joined by "; ", instead of CEL's rendering with a caret under the
// expression over several lines: these messages end up in diagnostics, reports and
// tables, one line each.
func (e *Error) Error() string {
	msgs := make([]string, len(e.Issues))
	for i, is := range e.Issues {
		at := fmt.Sprintf("column %d", is.Column)
		if is.Line > 1 {
			at = fmt.Sprintf("line %d, %s", is.Line, at)
		}
		msgs[i] = is.Message + " (" + at + ")"
	}
	return strings.Join(msgs, "; ")
}

func issues(iss *cel.Issues) error {
	errs := iss.Errors()
	if len(errs) == 0 {
		return iss.Err()
	}
	e := &Error{Issues: make([]Issue, len(errs))}
	for i, ce := range errs {
		e.Issues[i] = Issue{Line: max(ce.Location.Line(), 1), Column: ce.Location.Column() + 1, Message: ce.Message}
	}
	return e
}
