package plugin

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestNodeHooksAreCheckedAtLoad(t *testing.T) {
	const sum = "b02d90d256c1cb67d1e0c34361fca7dda432018ef7039dac4539b0d9ff0cc661"
	tests := []struct {
		name, hooks, want string
	}{{
		name: "valid url, ordering and once",
		hooks: `
      - {name: fetch, at: beforeNodeup, run: {url: "https://example.com/a.sh", sha256: ` + sum + `}, once: true}
      - {name: s3, at: beforeNodeup, run: {url: "s3://bucket/a.sh", sha256: ` + sum + `}, requires: [fetch, demo/fetch], before: [other/hook]}
      - {name: late, at: afterNodeup, run: {command: [/bin/true]}, requires: [other/hook], when: "versionAtLeast(cluster.kubernetesVersion, '1.30')"}`,
	}, {
		name:  "when does not compile",
		hooks: `[{name: h, at: beforeNodeup, run: {command: [/bin/true]}, when: "node.rol == 'worker'"}]`,
		want:  "plugin.yaml:7:78: spec.contributes.nodes[0].hooks[0].when: hook h of plugin demo: compile when \"node.rol == 'worker'\": column 5: undefined field 'rol'",
	}, {
		name:  "url without sha256",
		hooks: `[{name: h, at: beforeNodeup, run: {url: "https://example.com/a.sh"}}]`,
		want:  "hooks[0].run.url: hook h of plugin demo: a url needs sha256",
	}, {
		name:  "requires an unknown hook of the plugin",
		hooks: `[{name: h, at: beforeNodeup, run: {command: [/bin/true]}, requires: [demo/nope]}]`,
		want:  `hooks[0].requires[0]: hook h of plugin demo: requires names hook "demo/nope", which this plugin does not have here (known: h)`,
	}, {
		name: "requires cycle",
		hooks: `
      - {name: a, at: beforeNodeup, run: {command: [/bin/true]}, before: [b]}
      - {name: b, at: beforeNodeup, run: {command: [/bin/true]}, before: [a]}`,
		want: "hooks of plugin demo wait for each other in a cycle (before and requires): demo/a -> demo/b -> demo/a",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{"plugin.yaml": {Data: []byte(`apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: demo, version: 1.0.0}
spec:
  contributes:
    nodes:
    - hooks: ` + tt.hooks + "\n")}}
			_, l := Load(fsys, OriginUser, "demo")
			got := l.String()
			if tt.want == "" {
				if len(l) > 0 {
					t.Fatalf("diagnostics for valid hooks: %s", got)
				}
				return
			}
			if !l.HasFatal() || !strings.Contains(got, tt.want) {
				t.Errorf("diagnostics %q, expected a fatal one containing %q", got, tt.want)
			}
		})
	}
}
