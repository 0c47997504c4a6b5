package ssa

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/pkg/expr"
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

// CompileHealth checks that a health expression is valid CEL over object yielding a
// bool. Health expressions share expression checks' environment (expr.Object) and
// cost limit; the plugin loader compiles them the same way, so a plugin with a
// broken one is refused when it is loaded rather than at deploy time.
func CompileHealth(src string) (*expr.Program, error) {
	return expr.Object.Compile(src)
}

// Health is a plugin's compiled checks.
type Health []compiledCheck

type compiledCheck struct {
	HealthCheck
	prg *expr.Program
}

// CompileChecks compiles a plugin's health checks.
func CompileChecks(checks []HealthCheck) (Health, error) {
	var out Health
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
// field) counts as false: the field may not be set yet. So does one that costs more
// than expr.CostLimit, which a later poll will not change: the wait's timeout then
// names the expression and the reason. Canceling ctx interrupts an evaluation.
func (h Health) failing(ctx context.Context, o *unstructured.Unstructured) (string, string) {
	for _, c := range h {
		if c.Kind != o.GetKind() || (c.APIVersion != "" && c.APIVersion != o.GetAPIVersion()) {
			continue
		}
		ok, err := c.prg.Eval(ctx, map[string]any{"object": o.Object})
		if nb := (*expr.NotBoolError)(nil); errors.As(err, &nb) || (err == nil && !ok) {
			return c.Expression, "is false"
		}
		if err != nil {
			return c.Expression, "cannot be evaluated (" + err.Error() + ")"
		}
	}
	return "", ""
}
