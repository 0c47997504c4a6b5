package plugin

import (
	"strconv"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/yamldoc"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/expr"
)

// checkHealth compiles every health expression, so that a plugin whose expression is
// not valid CEL, or does not yield a bool, is refused when it is loaded, pointing at
// the expression, instead of failing its first deploy. The deployer compiles them
// in the same environment (expr.Object).
func checkHealth(doc *yamldoc.Doc, m *v1alpha1.Plugin, l *diag.List) {
	for i, h := range m.Spec.Health {
		if _, err := expr.Object.Compile(h.Expression); err != nil {
			doc.Errorf(l, "/spec/health/"+strconv.Itoa(i)+"/expression", "expected a CEL expression over object that yields a bool: %v", err)
		}
	}
}
