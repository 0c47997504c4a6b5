package plugins_test

import (
	"context"
	"os"
	"slices"
	"strings"
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

// TestREADMEListsEveryBuiltin: the README's "Built-in plugins:" paragraph names
// every built-in plugin, so a new user reading it finds them all.
func TestREADMEListsEveryBuiltin(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, para, ok := strings.Cut(string(readme), "\nBuilt-in plugins: ")
	if !ok {
		t.Fatal(`README.md has no "Built-in plugins:" paragraph`)
	}
	para, _, _ = strings.Cut(para, "\n\n")
	idx, _ := source.List(context.Background(), source.Builtin())
	for _, n := range idx.Names() {
		if !strings.Contains(para, "`"+n+"`") {
			t.Errorf("README.md's built-in plugin list does not name %s", n)
		}
	}
}

// TestREADMEDoesNotDisownWhatWorks: the quickstart shows `kubectl top` and
// Service names working through the built-in metrics-server and cluster-dns;
// no "Not yet" of the README may say otherwise.
func TestREADMEDoesNotDisownWhatWorks(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range strings.Split(string(readme), "Not yet")[1:] {
		sentence, _, _ := strings.Cut(part, ".\n")
		sentence, _, _ = strings.Cut(sentence, ". ")
		for _, works := range []string{"kubectl top", "CoreDNS", "metrics-server"} {
			if strings.Contains(sentence, works) {
				t.Errorf("README.md says %q is not there yet: %q", works, "Not yet"+sentence)
			}
		}
	}
}
