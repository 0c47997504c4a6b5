package declarative_test

import (
	"context"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/runtime/declarative"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// load returns the package at plugins/a: plugin.yaml from body, then path/content
// pairs.
func load(t testing.TB, body string, files ...string) *plugin.Package {
	t.Helper()
	fsys := fstest.MapFS{"plugin.yaml": {Data: []byte("apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: a, version: 1.0.0}\n" + body)}}
	for i := 0; i+1 < len(files); i += 2 {
		fsys[files[i]] = &fstest.MapFile{Data: []byte(files[i+1])}
	}
	p, l := plugin.Load(fsys, plugin.OriginUser, "plugins/a")
	if l.HasFatal() {
		t.Fatal(l)
	}
	return p
}

// request is a stage request with a control plane and two worker pools.
func request(st stage.Stage, values map[string]any) *stage.Request {
	return &stage.Request{
		Stage: st, Plugin: "a", Version: "1.0.0", Values: values,
		Model: model.New(
			model.PoolSpec{Name: model.ControlPlanePool, Role: model.RoleControlPlane, Count: 1},
			model.PoolSpec{Name: "workers", Role: model.RoleWorker, Count: 2},
			model.PoolSpec{Name: "edge", Role: model.RoleWorker, Count: 1},
		),
	}
}

func run(t testing.TB, rt stage.Runtime, req *stage.Request) *stage.Response {
	t.Helper()
	resp, err := rt.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestErrorsAreLocated: a failing template is a fatal diagnostic at the field of
// plugin.yaml, or the line and column of the manifest, it came from.
func TestErrorsAreLocated(t *testing.T) {
	for _, tc := range []struct {
		name string
		pkg  *plugin.Package
		want string
	}{{
		name: "contributes field",
		pkg:  load(t, "spec:\n  contributes:\n    controlPlane:\n      apiServer:\n        flags:\n          x: \"{{ required \\\"x is required\\\" .Values.missing }}\"\n"),
		want: "plugins/a/plugin.yaml:9:14: spec.contributes.controlPlane.apiServer.flags.x: template: at <required \"x is required\" .Values.missing>: error calling required: x is required",
	}, {
		name: "manifest line",
		pkg: load(t, "spec: {contributes: {kubernetes: {manifests: [m.yaml]}}}\n",
			"m.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name.first }}\n"),
		want: `plugins/a/m.yaml:4:18: template: at <.Values.name.first>: nil pointer evaluating interface {}.first`,
	}, {
		name: "output limit",
		pkg: load(t, "spec: {contributes: {kubernetes: {manifests: [m.yaml]}}}\n",
			"m.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {x: '{{ repeat 200000000 \"x\" }}'}\n"),
		want: `plugins/a/m.yaml:4:14: template: at <repeat 200000000 "x">: error calling repeat: rendering stopped: a function would make 190.7 MiB (200000000 bytes), more than the output limit of 16 MiB per template`,
	}, {
		name: "not an object",
		pkg: load(t, "spec: {contributes: {kubernetes: {manifests: [m.yaml]}}}\n",
			"m.yaml", "apiVersion: v1\nkind: ConfigMap\n"),
		want: `plugins/a/m.yaml (rendered):1:1: expected a Kubernetes object with metadata.name`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			resp := run(t, declarative.New(tc.pkg, nil), request(stage.Initialise, nil))
			if got := resp.Diagnostics.Fatal().String(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestNodeScope: node contributions reach the pools of the plugin's scope, its
// pools and its roles, each rendered with that pool's values.
func TestNodeScope(t *testing.T) {
	pkg := load(t, `spec:
  contributes:
    nodes:
      - roles: [worker]
        kubelet: {labels: {pool: "{{ .NodePool.Name }}", size: "{{ .Values.size | default \"m\" }}"}}
`)
	for _, tc := range []struct {
		name  string
		scope []string
		want  []string
	}{
		{name: "every pool of the role", want: []string{"edge=xl", "workers=m"}},
		{name: "the plugin's scope", scope: []string{"edge"}, want: []string{"edge=xl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := request(stage.Initialise, map[string]any{})
			req.PoolValues = map[string]map[string]any{"edge": {"size": "xl"}}
			resp := run(t, declarative.New(pkg, tc.scope), req)
			if len(resp.Diagnostics) > 0 {
				t.Fatal(resp.Diagnostics)
			}
			var got []string
			for name, p := range resp.Contribution.Pools {
				if p.Kubelet.Labels["pool"].Value != name {
					t.Errorf("pool %s labelled %q", name, p.Kubelet.Labels["pool"].Value)
				}
				got = append(got, name+"="+p.Kubelet.Labels["size"].Value)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("pools = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOnlyInitialise: the declarative parts contribute once, at initialise.
func TestOnlyInitialise(t *testing.T) {
	rt := declarative.New(load(t, "spec: {contributes: {controlPlane: {apiServer: {flags: {v: \"2\"}}}}}\n"), nil)
	for _, st := range stage.Stages {
		resp := run(t, rt, request(st, nil))
		if got := resp.Contribution != nil; got != (st == stage.Initialise) {
			t.Errorf("%s: contribution %+v", st, resp.Contribution)
		}
	}
}

// BenchmarkRun measures one initialise call of a plugin with a templated flag, a
// node contribution and a manifest: the declarative runtime's per-stage cost.
//
//	go test ./pkg/runtime/declarative -run '^$' -bench .
func BenchmarkRun(b *testing.B) {
	rt := declarative.New(load(b, `spec:
  contributes:
    controlPlane: {apiServer: {flags: {oidc-issuer-url: "https://{{ .Values.issuer }}"}}}
    nodes: [{roles: [worker], kubelet: {labels: {pool: "{{ .NodePool.Name }}"}}}]
    kubernetes: {manifests: [m.yaml]}
`, "m.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\ndata: {issuer: \"{{ .Values.issuer }}\"}\n"), nil)
	req := request(stage.Initialise, map[string]any{"issuer": "dex.example.com"})
	for b.Loop() {
		if resp := run(b, rt, req); len(resp.Diagnostics) > 0 {
			b.Fatal(resp.Diagnostics)
		}
	}
}
