package kubeschema

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func problems(t *testing.T, src Source, obj map[string]any) []string {
	t.Helper()
	gvk := schema.FromAPIVersionAndKind(obj["apiVersion"].(string), obj["kind"].(string))
	typ, ok, err := src.Type(gvk)
	if err != nil || !ok {
		t.Fatalf("Type(%v) = %v, %v", gvk, ok, err)
	}
	var out []string
	for _, p := range typ.Validate(obj) {
		s := p.Pointer + ": " + p.Message
		if p.AtKey {
			s = "key " + s
		}
		out = append(out, s)
	}
	return out
}

func TestBuiltin(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  string
		want []string
	}{
		{"valid deployment", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: x, labels: {a: b}}
spec:
  replicas: 2
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers:
      - name: c
        image: nginx
        ports: [{containerPort: 80}]
        resources: {limits: {cpu: 100m, memory: 1Gi}}
        livenessProbe: {httpGet: {port: http, path: /}}
`, nil},
		{"every problem in one pass", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: x, lables: {a: b}}
spec:
  replicas: "2"
  selector: {matchLabels: {a: b}}
  template:
    spec:
      containers:
      - name: c
        image: nginx
        imagePullPolcy: Always
        ports: {containerPort: 80}
      restartPolicy: [Always]
`, []string{
			`key /metadata/lables: unknown field "lables"; did you mean "labels"?`,
			`/spec/replicas: expected a number, found the string "2"`,
			`key /spec/template/spec/containers/0/imagePullPolcy: unknown field "imagePullPolcy"; did you mean "imagePullPolicy"?`,
			`/spec/template/spec/containers/0/ports: expected a list, found a mapping`,
			`/spec/template/spec/restartPolicy: expected a string, found a list`,
		}},
		{"configmap data is a map of strings", `
apiVersion: v1
kind: ConfigMap
metadata: {name: x}
data: {a: "1", b: true}
`, []string{`/data/b: expected a string, found the boolean true`}},
		{"crd", `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object}}
    subresource: {}
`, []string{`key /spec/versions/0/subresource: unknown field "subresource"; did you mean "subresources"?`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problems(t, Builtin(), decode(t, tc.obj))
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
		})
	}
}

func TestBuiltinUnknownKind(t *testing.T) {
	if _, ok, _ := Builtin().Type(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deploymnt"}); ok {
		t.Error("a mistyped kind has a schema")
	}
	if kinds := BuiltinKinds(schema.GroupVersion{Group: "apps", Version: "v1"}); !slices.Contains(kinds, "Deployment") {
		t.Errorf("BuiltinKinds(apps/v1) = %v, want Deployment among them", kinds)
	}
}

const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string}
              port: {x-kubernetes-int-or-string: true}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
              tags: {type: array, items: {type: string}}
`

func TestFromCRDs(t *testing.T) {
	src, errs := FromCRDs([]map[string]any{decode(t, widgetCRD)})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got := problems(t, src, decode(t, `
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: default, annotatons: {}}
spec:
  size: 3
  colour: red
  port: http
  extra: {anything: [1, 2]}
  tags: [a, 1]
`))
	want := []string{
		`key /metadata/annotatons: unknown field "annotatons"; did you mean "annotations"?`,
		`key /spec/colour: unknown field "colour"; did you mean "color"?`,
		`/spec/tags/1: expected a string, found the number 1`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
	if _, ok, _ := src.Type(schema.GroupVersionKind{Group: "example.com", Version: "v2", Kind: "Widget"}); ok {
		t.Error("a version the CRD does not define has a schema")
	}
}
