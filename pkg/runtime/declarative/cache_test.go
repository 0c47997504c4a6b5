package declarative_test

import (
	"testing"

	"github.com/kubeplug/kubeplug/pkg/runtime/declarative"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// TestManifestsRenderedAgainAreEqualAndOwnTheirMaps: a manifest rendered to the
// same text again (parsed once, then copied from what was parsed) yields equal
// objects, none shared with an earlier result; a file with a problem reports it
// every time.
func TestManifestsRenderedAgainAreEqualAndOwnTheirMaps(t *testing.T) {
	rt := declarative.New(load(t, "spec: {contributes: {kubernetes: {manifests: [m.yaml, bad.yaml]}}}\n",
		"m.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\ndata: {v: \"{{ .Values.v }}\", n: \"1\"}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}]}\n",
		"bad.yaml", "apiVersion: v1\nkind: ConfigMap\n"), nil)
	req := request(stage.Initialise, map[string]any{"v": "x"})
	first := run(t, rt, req)
	second := run(t, rt, req)
	for i, resp := range []*stage.Response{first, second} {
		if got := resp.Diagnostics.Fatal().String(); got != `plugins/a/bad.yaml (rendered):1:1: expected a Kubernetes object with metadata.name` {
			t.Errorf("run %d: diagnostics %q", i, got)
		}
	}
	a, b := first.Contribution.Kubernetes.Objects, second.Contribution.Kubernetes.Objects
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("objects: %d then %d, want 2", len(a), len(b))
	}
	if a[0].Object["data"].(map[string]any)["v"] != "x" || b[0].Object["data"].(map[string]any)["v"] != "x" {
		t.Errorf("rendered values: %v, %v", a[0].Object["data"], b[0].Object["data"])
	}
	// Changing what one run returned changes nothing another returns.
	a[0].Object["data"].(map[string]any)["v"] = "changed"
	a[1].Object["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)["port"] = 1
	third := run(t, rt, req).Contribution.Kubernetes.Objects
	for i, objs := range [][]map[string]any{{b[0].Object, b[1].Object}, {third[0].Object, third[1].Object}} {
		if objs[0]["data"].(map[string]any)["v"] != "x" || objs[1]["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)["port"] == 1 {
			t.Errorf("result %d shares maps with an earlier one: %v", i, objs)
		}
	}
	// Other values render other text: parsed afresh.
	other := run(t, rt, request(stage.Initialise, map[string]any{"v": "y"})).Contribution.Kubernetes.Objects
	if other[0].Object["data"].(map[string]any)["v"] != "y" {
		t.Errorf("other values: %v", other[0].Object["data"])
	}
}
