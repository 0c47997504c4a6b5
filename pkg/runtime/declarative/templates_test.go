package declarative_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/runtime/declarative"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// TestMapKeysRender: a map key is a template like any other string of the
// contributes block (an IAM condition key naming the cluster), and two keys
// that render alike are an error, not one silently replacing the other.
func TestMapKeysRender(t *testing.T) {
	pkg := load(t, `spec:
  contributes:
    cloud:
      iam:
        - role: worker
          statements:
            - Effect: Allow
              Action: [ec2:DescribeInstances]
              Resource: "*"
              Condition:
                StringEquals:
                  "aws:ResourceTag/kubernetes.io/cluster/{{ .Cluster.Metadata.Name }}": owned
`)
	req := request(stage.Initialise, nil)
	req.Cluster = &v1alpha1.Cluster{Metadata: v1alpha1.ClusterMetadata{Name: "prod"}}
	resp := run(t, declarative.New(pkg, nil), req)
	if len(resp.Diagnostics) > 0 {
		t.Fatal(resp.Diagnostics)
	}
	b, _ := json.Marshal(resp.Contribution.Cloud.IAM["worker"][0].Statement)
	if got := string(b); !strings.Contains(got, `"aws:ResourceTag/kubernetes.io/cluster/prod":"owned"`) {
		t.Errorf("statement %s: the key is not rendered", got)
	}

	dup := load(t, `spec:
  contributes:
    controlPlane:
      apiServer:
        flags:
          "{{ .Values.a }}": "1"
          "{{ .Values.b }}": "2"
`)
	resp = run(t, declarative.New(dup, nil), request(stage.Initialise, map[string]any{"a": "v", "b": "v"}))
	want := `plugins/a/plugin.yaml:10:30: spec.contributes.controlPlane.apiServer.flags["{{ .Values.b }}"]: key "{{ .Values.b }}" renders as "v", as key "{{ .Values.a }}" does`
	if got := resp.Diagnostics.Fatal().String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestSourceTemplate: a node file's source is rendered when the plugin says it
// is a template, with the pool's data, and a failure points at its line; without
// template: true it is copied byte for byte.
func TestSourceTemplate(t *testing.T) {
	pkg := load(t, `spec:
  contributes:
    nodes:
      - pools: [edge]
        files:
          - {path: /etc/a.conf, source: a.conf, template: true}
          - {path: /etc/b.sh, source: b.sh}
`, "a.conf", "pool={{ .NodePool.Name }} size={{ .Values.size }}\n", "b.sh", "echo ${{x}}\n")
	resp := run(t, declarative.New(pkg, nil), request(stage.Initialise, map[string]any{"size": "xl"}))
	if len(resp.Diagnostics) > 0 {
		t.Fatal(resp.Diagnostics)
	}
	files := resp.Contribution.Pools["edge"].Files
	if got := files["/etc/a.conf"].Content; got != "pool=edge size=xl\n" {
		t.Errorf("a.conf = %q, want it rendered", got)
	}
	if got := files["/etc/b.sh"].Content; got != "echo ${{x}}\n" {
		t.Errorf("b.sh = %q, want it as written", got)
	}

	bad := load(t, "spec: {contributes: {nodes: [{files: [{path: /etc/a, source: a, template: true}]}]}}\n",
		"a", "ok\n{{ .Values.x.y }}\n")
	resp = run(t, declarative.New(bad, []string{"edge"}), request(stage.Initialise, nil))
	want := "plugins/a/a:2:10: template: at <.Values.x.y>: nil pointer evaluating interface {}.y"
	if got := resp.Diagnostics.Fatal().String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestDuplicateObjects: two manifest objects of one plugin with the same group,
// kind, namespace and name are an error at the second naming the first, not a
// surprise at apply.
func TestDuplicateObjects(t *testing.T) {
	pkg := load(t, "spec: {contributes: {kubernetes: {manifests: [a.yaml, b.yaml]}}}\n",
		"a.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x, namespace: ns}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: ns}\n",
		"b.yaml", "# the same Deployment again\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x, namespace: ns}\n")
	resp := run(t, declarative.New(pkg, nil), request(stage.Initialise, nil))
	want := "plugins/a/b.yaml (rendered):2:1: Deployment.apps ns/x is defined twice by plugin a: here and at plugins/a/a.yaml (rendered):1:1; the second would replace the first at apply"
	if got := resp.Diagnostics.Fatal().String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestMaskedUnit: a node contribution masks a unit the OS has (the checks of
// a masked unit are plugin.Load's: TestNodeChecks).
func TestMaskedUnit(t *testing.T) {
	pkg := load(t, `spec:
  contributes:
    nodes:
      - pools: [workers]
        systemdUnits:
          - {name: update-engine.service, mask: true}
`)
	resp := run(t, declarative.New(pkg, nil), request(stage.Initialise, nil))
	if len(resp.Diagnostics) > 0 {
		t.Fatal(resp.Diagnostics)
	}
	if u := resp.Contribution.Pools["workers"].Units["update-engine.service"]; u == nil || !u.Mask {
		t.Errorf("unit = %+v, want masked", u)
	}
}
