// Package deploytest holds fixtures the deploy packages' tests share: a CustomResourceDefinition
// and helpers to decode and edit it. Tests only; nothing in a build links it.
package deploytest

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// WidgetsV1 is a live CRD: v1 served and stored.
const WidgetsV1 = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
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
            required: [size]
            properties:
              size: {type: integer, description: how big}
              mode: {type: string, enum: [fast, slow]}
              config: {type: object, x-kubernetes-preserve-unknown-fields: true}
              ports:
                type: array
                items:
                  type: object
                  properties:
                    port: {type: integer}
              labels:
                type: object
                additionalProperties:
                  type: object
                  properties:
                    value: {type: string}
status:
  storedVersions: [v1]
`

// CRD decodes a CRD from YAML text and lets edit change it.
func CRD(t testing.TB, text string, edit func(m map[string]any)) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(text), &m); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(m)
	}
	return m
}

// V1Spec returns the properties of .spec in version i of the CRD.
func V1Spec(m map[string]any, i int) map[string]any {
	vs := m["spec"].(map[string]any)["versions"].([]any)
	s := vs[i].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
	return s["properties"].(map[string]any)["spec"].(map[string]any)
}
