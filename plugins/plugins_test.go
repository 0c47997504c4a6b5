package plugins_test

import (
	"context"
	"slices"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/source"
)

// TestBuiltinPluginsLoadClean loads the built-in plugins the way the binary does and
// fails on any diagnostic, warning included: a built-in that stops linting (a schema
// change, a default that no longer matches its values schema, a missing file) breaks
// every user, so it must break this test first.
func TestBuiltinPluginsLoadClean(t *testing.T) {
	idx, l := source.List(context.Background(), source.Builtin())
	pkgs, fl := source.FetchAll(context.Background(), idx, idx.All(), 4)
	for _, d := range append(l, fl...) {
		t.Errorf("%s", d.String())
	}
	want := []string{
		"bastion",
		"control-plane",
		"ingress-nginx",
		"metrics-server",
		"node-monitoring",
		"oidc",
	}
	names := idx.Names()
	for _, n := range want {
		if !slices.Contains(names, n) {
			t.Errorf("built-in plugin %q is missing; built-ins found: %v", n, names)
		}
	}
	for _, p := range pkgs {
		if p != nil && p.Schema == nil {
			t.Errorf("built-in plugin %s has no values schema; every built-in declares one", p.ID())
		}
	}
}
