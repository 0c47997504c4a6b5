package plugin

import (
	"strconv"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/yamldoc"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

// checkHealth compiles every health expression, so that a plugin whose expression is
// not valid CEL, or does not yield a bool, is refused when it is loaded, pointing at
// the expression, instead of failing its first deploy.
func checkHealth(doc *yamldoc.Doc, m *v1alpha1.Plugin, l *diag.List) {
	for i, h := range m.Spec.Health {
		if _, err := deploy.CompileHealth(h.Expression); err != nil {
			doc.Errorf(l, "/spec/health/"+strconv.Itoa(i)+"/expression", "expected a CEL expression over object that yields a bool: %v", err)
		}
	}
}
