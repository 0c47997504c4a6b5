package config_test

import (
	"slices"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

// TestEdits edits a cluster in memory as uninstall and rollback do: the copy
// enables other plugins, the original (and the file) stay as they were, and
// diagnostics about the copy's entries point at the lines the file has them on.
func TestEdits(t *testing.T) {
	const file = `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: edit}
spec:
  kubernetesVersion: 1.37.1
  plugins:
    order: [a, b]
    enabled:
      - {name: a, version: "^1"}
      - {name: b, values: {x: 1}}
      - {name: c, version: "^2", values: {y: 2}}
`
	cl, l := config.Parse("cluster.yaml", []byte(file))
	if l.HasFatal() {
		t.Fatal(l)
	}
	names := func(c *config.Cluster) []string {
		var out []string
		for _, r := range c.Enabled() {
			out = append(out, r.Name+" "+r.Version)
		}
		return out
	}
	lineOf := func(c *config.Cluster, ptr string) int {
		var l diag.List
		c.Errorf(&l, ptr, "here")
		return l[0].Line
	}

	without := cl.Without("b")
	if got, want := names(without), []string{"a ^1", "c ^2"}; !slices.Equal(got, want) {
		t.Errorf("Without(b) enables %q, want %q", got, want)
	}
	if got := without.Spec.Spec.Plugins.Order; !slices.Equal(got, []string{"a"}) {
		t.Errorf("Without(b) orders %q, want [a]", got)
	}
	if got := lineOf(without, "/spec/plugins/enabled/1/version"); got != 11 {
		t.Errorf("Without(b): c's version reported on line %d, want 11 (where the file has it)", got)
	}
	if got := without.Enabled()[1].Values["y"]; got == nil {
		t.Errorf("Without(b) lost c's values")
	}

	pinned := without.Pinned("c", "2.1.0")
	if got, want := names(pinned), []string{"a ^1", "c =2.1.0"}; !slices.Equal(got, want) {
		t.Errorf("Pinned(c) enables %q, want %q", got, want)
	}
	if got := lineOf(pinned, "/spec/plugins/enabled/1/name"); got != 11 {
		t.Errorf("Pinned(c) after Without(b): c reported on line %d, want 11", got)
	}
	if got, want := names(cl.Pinned("d", "1.0.0")), []string{"a ^1", "b ", "c ^2", "d =1.0.0"}; !slices.Equal(got, want) {
		t.Errorf("Pinned(d), not enabled, enables %q, want %q", got, want)
	}

	// The original is untouched.
	if got, want := names(cl), []string{"a ^1", "b ", "c ^2"}; !slices.Equal(got, want) {
		t.Errorf("after the edits the original enables %q, want %q", got, want)
	}
	if got := cl.Spec.Spec.Plugins.Order; !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("after the edits the original orders %q", got)
	}
	if got := lineOf(cl, "/spec/plugins/enabled/1/name"); got != 10 {
		t.Errorf("original: b reported on line %d, want 10", got)
	}
}
