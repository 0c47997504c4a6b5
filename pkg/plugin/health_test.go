package plugin

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestHealthExpressionIsCheckedAtLoad(t *testing.T) {
	for _, tc := range []struct {
		expr, want string
	}{
		{`object.data.ready == "true"`, ""},
		{`object.data.ready ==`, "plugin.yaml:7:19: spec.health[0].expression: expected a CEL expression"},
		{`"yes"`, "yields string, expected bool"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			fsys := fstest.MapFS{"plugin.yaml": {Data: []byte(`apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: flag, version: 1.0.0}
spec:
  health:
    - kind: ConfigMap
      expression: '` + tc.expr + `'
`)}}
			_, l := Load(fsys, OriginUser, "flag")
			got := l.String()
			if tc.want == "" {
				if l.HasFatal() {
					t.Fatalf("a valid expression was refused: %s", got)
				}
				return
			}
			if !l.HasFatal() || !strings.Contains(got, tc.want) {
				t.Errorf("diagnostics %q, want a fatal one containing %q", got, tc.want)
			}
		})
	}
}
