package engine_test

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/kubeplug/kubeplug/pkg/engine"
)

// TestDefaultsAndChecksRender: spec.values.defaults strings are templates over
// the cluster (a value the cluster sets is taken as is), and validate checks
// are templates over the plugin's values, rendered when the plan is made; a
// template that fails there is an error at its line of plugin.yaml.
func TestDefaultsAndChecksRender(t *testing.T) {
	idx := pkgs(t, map[string]fstest.MapFS{"logs": manifest(`metadata: {name: logs, version: 1.0.0}
spec:
  values:
    defaults:
      ns: "{{ .Cluster.Metadata.Name }}-logs"
      bucket: "{{ .Cluster.Metadata.Name }}-bucket"
  validate:
    - wait: {apiVersion: apps/v1, kind: Deployment, namespace: "{{ .Values.ns }}", name: "{{ .Values.bucket }}"}
`)})
	cl := cluster(t, "      - {name: logs, values: {bucket: mine}}\n")
	plan, l := engine.New(engine.Options{}).Plan(context.Background(), cl, idx)
	if l.HasFatal() {
		t.Fatal(l)
	}
	p := plan.Plugins[0]
	if got := p.Values.Cluster["ns"]; got != "test-logs" {
		t.Errorf("ns = %v, want the default rendered: test-logs", got)
	}
	if got := p.Values.Cluster["bucket"]; got != "mine" {
		t.Errorf("bucket = %v, want the cluster's value", got)
	}
	if len(p.Checks) != 1 || p.Checks[0].Wait.Namespace != "test-logs" || p.Checks[0].Wait.Name != "mine" {
		t.Errorf("checks = %+v, want the wait rendered for test-logs/mine", p.Checks)
	}

	bad := pkgs(t, map[string]fstest.MapFS{"logs": manifest(`metadata: {name: logs, version: 1.0.0}
spec:
  validate:
    - wait: {kind: Deployment, name: "{{ .Values.x.y }}"}
`)})
	_, l = engine.New(engine.Options{}).Plan(context.Background(), cluster(t, "      - {name: logs}\n"), bad)
	want := "plugins/logs/plugin.yaml:6:38: spec.validate[0].wait.name: template: at <.Values.x.y>: nil pointer evaluating interface {}.y"
	if got := l.Fatal().String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestPlanFileKey: a node file's plan key is POOL:PATH, not POOL//PATH.
func TestPlanFileKey(t *testing.T) {
	idx := pkgs(t, map[string]fstest.MapFS{"f": manifest(`metadata: {name: f, version: 1.0.0}
spec: {contributes: {nodes: [{pools: [edge], files: [{path: /opt/bin/x, content: x}]}]}}
`)})
	cl := cluster(t, "      - {name: f}\n")
	plan, _, l := run(t, cl, idx, engine.Options{})
	if l.HasFatal() {
		t.Fatal(l)
	}
	res, _ := engine.New(engine.Options{}).Run(context.Background(), plan, "initialise")
	var keys []string
	for _, c := range plan.Doc(res.Model).Contributions {
		if c.Kind == "nodes.file" {
			keys = append(keys, c.Key)
		}
	}
	if len(keys) != 1 || keys[0] != "edge:/opt/bin/x" {
		t.Errorf("file keys %q, want [edge:/opt/bin/x]", keys)
	}
}
