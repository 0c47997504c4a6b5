package expansion_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/expansion"
)

// TestProviderNames: the provider's steps and conditions an expansion names
// (provider/NAME) are checked against the provider's table, each error at its
// line naming the expansion; ProviderSkips hands the skipped steps to the
// provider with the expansion that skips them.
func TestProviderNames(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"expansion.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Expansion
metadata: {name: site, version: 1.0.0}
spec:
  skipSteps: [provider/node-routes, provider/control-plane, provider/nonesuch, validate]
  skipConditions: [provider/dns]
  delegateConditions:
  - {check: provider/dns-ready, operator: site-dns, condition: DNSReady}
`})
	pkg, l := expansion.OpenSource(context.Background(), dir, expansion.Limits{})
	if l.HasFatal() {
		t.Fatal(l)
	}
	ps := expansion.ProviderSteps{Provider: "local", Steps: []string{"control-plane", "node-routes"}, Skippable: []string{"node-routes"}, Conditions: []string{"dns-ready"}}
	got := pkg.CheckProviderNames(ps).String()
	for _, want := range []string{
		`expansion.yaml:5:37: spec.skipSteps\[1\]: expansion site skips step provider/control-plane: the local provider cannot create a cluster without its step control-plane \(steps a site may skip: node-routes\)`,
		`expansion.yaml:5:61: spec.skipSteps\[2\]: expansion site skips step provider/nonesuch: the local provider has no step "nonesuch" \(its steps: control-plane, node-routes; a site may skip: node-routes\)`,
		`expansion.yaml:6:20: spec.skipConditions\[0\]: expansion site skips condition provider/dns: the local provider has no readiness condition "dns" \(it has: dns-ready\)`,
	} {
		if !matches(t, want, got) {
			t.Errorf("got %s\nwant /%s/", got, want)
		}
	}
	for _, not := range []string{"node-routes:", "dns-ready:", "validate"} {
		if matches(t, `skips step provider/`+not, got) || matches(t, `delegates condition provider/dns-ready`, got) {
			t.Errorf("%s refused: %s", not, got)
		}
	}
	// A provider with no table refuses every provider/NAME.
	if l := pkg.CheckProviderNames(expansion.ProviderSteps{Provider: "aws"}); !matches(t, `the aws provider has no step "node-routes" \(its steps: none; a site may skip: none\)`, l.String()) {
		t.Errorf("aws: %s", l)
	}
	set := &expansion.Set{Expansions: []*expansion.Loaded{{Package: pkg}}}
	skips := set.ProviderSkips()
	if keys := slices.Sorted(maps.Keys(skips)); !slices.Equal(keys, []string{"control-plane", "node-routes", "nonesuch"}) || skips["node-routes"] != "site" {
		t.Errorf("ProviderSkips = %v", skips)
	}
}
