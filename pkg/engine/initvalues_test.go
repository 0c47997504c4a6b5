package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// TestInitialisedValues: values plugin code returns at initialise are merged
// over its values, seen by its later stages and by the plugins after it
// (.Plugins), and checked against its schema again: a value the schema refuses
// is a fatal diagnostic naming the plugin and the value.
func TestInitialisedValues(t *testing.T) {
	defs := func() map[string]fstest.MapFS {
		return map[string]fstest.MapFS{
			"code": manifest("metadata: {name: code, version: 1.0.0}\nspec: {values: {schema: values.schema.json, defaults: {size: 1}}}\n",
				"values.schema.json", `{"type": "object", "properties": {"size": {"type": "integer"}, "name": {"type": "string"}}}`),
			"reader": manifest(`metadata: {name: reader, version: 1.0.0}
spec:
  requires: [{name: code}]
  contributes: {cloud: {outputs: {seen: '{{ optional .Plugins.code.Values.name }}'}}}
`),
		}
	}
	for _, tc := range []struct {
		name     string
		returned map[string]any
		fatal    string
	}{
		{name: "merged", returned: map[string]any{"name": "generated"}},
		{name: "refused by the schema", returned: map[string]any{"size": "big"},
			fatal: "plugin code: the values its code returned at initialise do not match its schema: values /size:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var later map[string]any
			rt := stage.RuntimeFunc(func(_ context.Context, req *stage.Request) (*stage.Response, error) {
				if req.Stage == stage.Initialise {
					return &stage.Response{Values: tc.returned}, nil
				}
				if req.Stage == stage.Render {
					later = req.Values
				}
				return nil, nil
			})
			_, res, l := run(t, cluster(t, "      - {name: reader}\n"), pkgs(t, defs()), engine.Options{Runtimes: inProcess("code", rt)})
			if tc.fatal != "" {
				if f := l.Fatal(); len(f) != 1 || !strings.Contains(f[0].Message, tc.fatal) {
					t.Fatalf("diagnostics:\n%s\nwant one fatal containing %q", l, tc.fatal)
				}
				return
			}
			if l.HasFatal() {
				t.Fatal(l)
			}
			if later["name"] != "generated" || fmt.Sprint(later["size"]) != "1" {
				t.Errorf("values at render = %v, want the default and the initialised name", later)
			}
			if got := res.Model.Cloud.Outputs["seen"].Value; got != "generated" {
				t.Errorf("reader saw .Plugins.code.Values.name = %v, want generated", got)
			}
		})
	}
}
