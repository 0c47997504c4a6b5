package plugin_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// TestNodeChecks: what plugin.Load refuses in node contributions, at the line
// and field: a file with no or two sources, a url without the sha256 that pins
// it, a masked unit that is also written or started.
func TestNodeChecks(t *testing.T) {
	for _, tc := range []struct{ name, nodes, want string }{
		{"url without sha256", "files: [{path: /opt/bin/a, url: 'https://example.com/a'}]",
			"plugin.yaml:7:39: spec.contributes.nodes[0].files[0].url: file /opt/bin/a: a url needs sha256"},
		{"url and content", "files: [{path: /opt/bin/a, content: x, url: 'https://example.com/a', sha256: " + strings.Repeat("a", 64) + "}]",
			"spec.contributes.nodes[0].files[0]: expected exactly one of content, source and url"},
		{"url not http", "files: [{path: /opt/bin/a, url: 'ftp://example.com/a', sha256: " + strings.Repeat("a", 64) + "}]",
			`spec.contributes.nodes[0].files[0].url: file /opt/bin/a: expected an https:// or http:// URL, found "ftp://example.com/a"`},
		{"sha256 without url", "files: [{path: /opt/bin/a, content: x, sha256: " + strings.Repeat("a", 64) + "}]",
			"spec.contributes.nodes[0].files[0].sha256: file /opt/bin/a: sha256 pins a url; this file has none"},
		{"masked and enabled", "systemdUnits: [{name: a.service, mask: true, enable: true}]",
			"spec.contributes.nodes[0].systemdUnits[0].mask: unit a.service: a masked unit cannot have content, enable or drop-ins"},
		{"fine", "files: [{path: /opt/bin/a, url: 'https://example.com/a', sha256: " + strings.Repeat("a", 64) + "}]\n      systemdUnits: [{name: a.service, mask: true}]", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{"plugin.yaml": {Data: []byte("apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: a, version: 1.0.0}\nspec:\n  contributes:\n    nodes:\n    - " + tc.nodes + "\n")}}
			_, l := plugin.Load(fsys, plugin.OriginUser, "")
			got := l.Fatal().String()
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("diagnostics %q, want %q", got, tc.want)
			}
		})
	}
}
