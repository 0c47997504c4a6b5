package nodeagent

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
	"github.com/Masterminds/semver/v3"
)

// Cluster is what a hook's condition knows about the cluster, as the CEL variable
// `cluster`.
type Cluster struct {
	// Name of the cluster.
	Name string `json:"name,omitempty"`
	// KubernetesVersion like "1.37.2". Compare it with versionAtLeast or semver(),
	// never as a string: '1.9' >= '1.30' is true for strings.
	KubernetesVersion string `json:"kubernetesVersion"`
}

// Node is what a hook's condition knows about the machine, as the CEL variable `node`.
type Node struct {
	// Name of the node (the host name unless told otherwise).
	Name string `json:"name,omitempty"`
	// Pool is the node pool the machine belongs to.
	Pool string `json:"pool"`
	// Role is the pool's role, for example worker or control-plane.
	Role string `json:"role"`
	// Labels are the node's labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// semverType is the CEL type of semver(s). CEL's relational operators dispatch on the
// Comparer trait, so declaring the overloads is enough for <, <=, > and >=.
var semverType = types.NewObjectType("kubeplug.Semver", traits.ComparerType)

// semverVal is a parsed version inside CEL.
type semverVal struct{ v *semver.Version }

var (
	_ ref.Val         = semverVal{}
	_ traits.Comparer = semverVal{}
)

func (s semverVal) ConvertToNative(t reflect.Type) (any, error) {
	switch t {
	case reflect.TypeFor[*semver.Version]():
		return s.v, nil
	case reflect.TypeFor[string]():
		return s.v.String(), nil
	}
	return nil, fmt.Errorf("semver: no conversion to %v", t)
}

func (s semverVal) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case semverType:
		return s
	case types.StringType:
		return types.String(s.v.String())
	case types.TypeType:
		return semverType
	}
	return types.NewErr("semver: no conversion to %s", t.TypeName())
}

func (s semverVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(semverVal)
	return types.Bool(ok && s.v.Equal(o.v))
}

// Compare orders versions semantically: 1.9 < 1.10.
func (s semverVal) Compare(other ref.Val) ref.Val {
	o, ok := other.(semverVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Int(s.v.Compare(o.v))
}

func (s semverVal) Type() ref.Type { return semverType }
func (s semverVal) Value() any     { return s.v }

// parseVersion is lenient the way Kubernetes versions are written: "1.30", "v1.37.2".
func parseVersion(fn string, v ref.Val) (*semver.Version, ref.Val) {
	s, ok := v.(types.String)
	if !ok {
		return nil, types.NewErr("%s: expected a string, found %s", fn, v.Type().TypeName())
	}
	p, err := semver.NewVersion(string(s))
	if err != nil {
		return nil, types.NewErr("%s: %q is not a version like 1.30 or 1.37.2: %v", fn, string(s), err)
	}
	return p, nil
}

func semverCompare(op string) cel.EnvOption {
	return cel.Function(op, cel.Overload(op+"_semver_semver", []*cel.Type{semverType, semverType}, cel.BoolType))
}

// newEnv is the CEL environment of hook conditions; see the package documentation.
func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		ext.NativeTypes(reflect.TypeFor[Cluster](), reflect.TypeFor[Node](), ext.ParseStructTag("json")),
		cel.Variable("cluster", cel.ObjectType("nodeagent.Cluster")),
		cel.Variable("node", cel.ObjectType("nodeagent.Node")),
		ext.Strings(),
		cel.Function("versionAtLeast", cel.Overload("versionAtLeast_string_string", []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType,
			cel.BinaryBinding(func(v, minimum ref.Val) ref.Val {
				a, err := parseVersion("versionAtLeast", v)
				if err != nil {
					return err
				}
				b, err := parseVersion("versionAtLeast", minimum)
				if err != nil {
					return err
				}
				return types.Bool(a.Compare(b) >= 0)
			}))),
		cel.Function("semver", cel.Overload("semver_string", []*cel.Type{cel.StringType}, semverType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				p, err := parseVersion("semver", v)
				if err != nil {
					return err
				}
				return semverVal{p}
			}))),
		cel.Function("major", cel.MemberOverload("semver_major", []*cel.Type{semverType}, cel.IntType,
			cel.UnaryBinding(func(v ref.Val) ref.Val { return types.Int(v.(semverVal).v.Major()) }))), //nolint:gosec // versions are far below 2^63
		cel.Function("minor", cel.MemberOverload("semver_minor", []*cel.Type{semverType}, cel.IntType,
			cel.UnaryBinding(func(v ref.Val) ref.Val { return types.Int(v.(semverVal).v.Minor()) }))), //nolint:gosec // as above
		semverCompare(operators.Less),
		semverCompare(operators.LessEquals),
		semverCompare(operators.Greater),
		semverCompare(operators.GreaterEquals),
	)
}

// condition is a compiled `when`.
type condition struct {
	prg cel.Program
	// warning is set for an expression that compiles but likely means something else.
	warning string
}

// compile checks expr against the environment and insists on a bool result.
func compile(env *cel.Env, expr string) (*condition, error) {
	checked, iss := env.Compile(expr)
	if iss.Err() != nil {
		// One line per condition, "column: message", instead of CEL's multi-line
		// rendering with a caret: it ends up in reports, tables and lint output.
		var msgs []string
		for _, e := range iss.Errors() {
			msgs = append(msgs, fmt.Sprintf("column %d: %s", e.Location.Column()+1, e.Message))
		}
		return nil, fmt.Errorf("compile when %q: %s", expr, strings.Join(msgs, "; "))
	}
	if !checked.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("when %q is of type %s, expected bool", expr, checked.OutputType())
	}
	prg, err := env.Program(checked, cel.InterruptCheckFrequency(64), cel.CostLimit(100_000))
	if err != nil {
		return nil, fmt.Errorf("prepare when %q: %w", expr, err)
	}
	return &condition{prg: prg, warning: stringVersionWarning(checked.NativeRep())}, nil
}

// stringVersionWarning flags `cluster.kubernetesVersion >= '1.30'` and the like: valid
// CEL, kept working for the plugins written so, but compared character by character.
func stringVersionWarning(a *ast.AST) string {
	for _, op := range []string{operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals} {
		for _, call := range ast.MatchDescendants(ast.NavigateAST(a), ast.FunctionMatcher(op)) {
			for _, arg := range call.AsCall().Args() {
				if arg.Kind() == ast.SelectKind && arg.AsSelect().FieldName() == "kubernetesVersion" {
					return "when compares cluster.kubernetesVersion as a string, so '1.9' >= '1.30'; use versionAtLeast(cluster.kubernetesVersion, '1.30') or semver(...) >= semver(...)"
				}
			}
		}
	}
	return ""
}

// eval runs the condition; an evaluation error (a missing label, a bad version) is an
// error, not false, so that a typo does not silently skip a hook.
func (c *condition) eval(ctx context.Context, cluster Cluster, node Node) (bool, error) {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	out, _, err := c.prg.ContextEval(ctx, map[string]any{"cluster": cluster, "node": node})
	if err != nil {
		return false, fmt.Errorf("evaluate when: %w", err)
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("evaluate when: expected bool, found %s", out.Type().TypeName())
	}
	return bool(b), nil
}

// CheckCondition compiles a hook's `when` in the agent's own environment, so that
// `kubeplug plugin lint` rejects what the agent would fail on the machine. The error
// says what does not compile, or that the result is not a bool.
func CheckCondition(expr string) error {
	env, err := conditionEnv()
	if err != nil {
		return err
	}
	_, err = compile(env, expr)
	return err
}

// conditionEnv is built once: lint checks every hook of every plugin.
var conditionEnv = sync.OnceValues(func() (*cel.Env, error) {
	env, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("hook condition environment: %w", err)
	}
	return env, nil
})
