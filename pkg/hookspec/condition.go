package hookspec

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/pkg/expr"
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

// conditionEnv is the CEL environment of hook conditions (see the package
// documentation): kubeplug's common environment (package expr: the strings
// extension, optional types, the cost limit) with the cluster and node facts and
// the version functions.
var conditionEnv = expr.NewEnv(
	ext.NativeTypes(reflect.TypeFor[Cluster](), reflect.TypeFor[Node](), ext.ParseStructTag("json")),
	cel.Variable("cluster", cel.ObjectType("hookspec.Cluster")),
	cel.Variable("node", cel.ObjectType("hookspec.Node")),
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

// Condition is a compiled `when`, safe for concurrent use.
type Condition struct {
	prg *expr.Program
	// warning is set for an expression that compiles but likely means something else.
	warning string
}

// CompileCondition checks a hook's `when` and insists on a bool result. The error
// names the expression and each issue's column, on one line: it ends up in
// reports, tables and lint output.
func CompileCondition(src string) (*Condition, error) {
	prg, err := conditionEnv.Compile(src)
	if ce := (*expr.Error)(nil); errors.As(err, &ce) {
		msgs := make([]string, len(ce.Issues))
		for i, is := range ce.Issues {
			msgs[i] = fmt.Sprintf("column %d: %s", is.Column, is.Message)
		}
		return nil, fmt.Errorf("compile when %q: %s", src, strings.Join(msgs, "; "))
	}
	if nb := (*expr.NotBoolError)(nil); errors.As(err, &nb) {
		return nil, fmt.Errorf("when %q is of type %s, expected bool", src, nb.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("hook condition environment: %w", err)
	}
	return &Condition{prg: prg, warning: stringVersionWarning(prg.AST().NativeRep())}, nil
}

// CheckCondition compiles a hook's `when` as the node agent does, so that
// `kubeplug plugin lint` rejects what the agent would fail on the machine. The error
// says what does not compile, or that the result is not a bool.
func CheckCondition(src string) error {
	_, err := CompileCondition(src)
	return err
}

// Warning is about an expression that compiles but likely means something else,
// like comparing cluster.kubernetesVersion as a string; "" when there is none.
func (c *Condition) Warning() string { return c.warning }

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

// Eval runs the condition; an evaluation error (a missing label, a bad version, the
// cost limit) is an error, not false, so that a typo does not silently skip a hook.
func (c *Condition) Eval(ctx context.Context, cluster Cluster, node Node) (bool, error) {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	ok, err := c.prg.Eval(ctx, map[string]any{"cluster": cluster, "node": node})
	if nb := (*expr.NotBoolError)(nil); errors.As(err, &nb) {
		return false, fmt.Errorf("evaluate when: expected bool, found %s", nb.Type)
	}
	if err != nil {
		return false, fmt.Errorf("evaluate when: %w", err)
	}
	return ok, nil
}
