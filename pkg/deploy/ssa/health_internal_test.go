package ssa

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestHealthExpressionsRunUnderTheCostLimit: a health expression too expensive to
// evaluate fails with CEL's reason instead of holding the wait's poll loop; before
// health expressions shared expr's environment they ran without a limit.
func TestHealthExpressionsRunUnderTheCostLimit(t *testing.T) {
	// CEL prices contains at (len/10)*(len(sub)/10): 16 million units over 40,000
	// characters, more than expr.CostLimit.
	h, err := CompileChecks([]HealthCheck{{Kind: "ConfigMap", Expression: `object.data.s.contains(object.data.s)`}})
	if err != nil {
		t.Fatal(err)
	}
	cm := func(s string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "big"},
			"data":     map[string]any{"s": s},
		}}
	}
	if expr, why := h.failing(t.Context(), cm(strings.Repeat("a", 40_000))); expr == "" || !strings.Contains(why, "cost limit exceeded") {
		t.Errorf("failing = %q, %q; expected the cost limit to stop the expression", expr, why)
	}
	if expr, why := h.failing(t.Context(), cm("short")); expr != "" {
		t.Errorf("failing = %q, %q over a short string; expected it to hold", expr, why)
	}
}
