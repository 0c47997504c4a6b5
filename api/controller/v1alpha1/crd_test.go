package v1alpha1

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the checked-in CRDs from the Go types")

// column is an additionalPrinterColumn.
type column struct{ name, typ, path string }

// rule is a CEL validation rule at a path of the spec schema ("" for the spec,
// "plugins[]" for the items of plugins, "a.b" for nested properties). A rule
// with listMapKey instead makes the list at "at" a map list keyed by it (the API
// server refuses two items with the same key), and listSet a set of scalars.
type rule struct{ at, rule, message string }

// listType makes the list at path a set (key "") or a map list keyed by key.
type listType struct{ at, key string }

var (
	readyCol  = column{"Ready", "string", `.status.conditions[?(@.type=="Ready")].status`}
	statusCol = column{"Status", "string", `.status.conditions[?(@.type=="Ready")].message`}
	exactlyOf = func(fields ...string) string {
		has := make([]string, len(fields))
		for i, f := range fields {
			has[i] = "has(self." + f + ")"
		}
		return "[" + strings.Join(has, ", ") + "].filter(x, x).size() == 1"
	}
)

var crdDefs = []struct {
	kind, plural, short string
	spec, status        any
	columns             []column
	rules               []rule
	lists               []listType
}{
	{
		kind: "PluginCatalog", plural: "plugincatalogs", short: "pcat",
		spec: &PluginCatalogSpec{}, status: &PluginCatalogStatus{},
		columns: []column{readyCol, statusCol},
		rules: []rule{
			{"sources[]", exactlyOf("url", "configMap", "secret"), "a source sets exactly one of url, configMap and secret"},
		},
	},
	{
		kind: "PluginInstallation", plural: "plugininstallations", short: "pinst",
		spec: &PluginInstallationSpec{}, status: &PluginInstallationStatus{},
		columns: []column{{"Target", "string", ".spec.target"}, readyCol, statusCol},
		lists:   []listType{{"plugins", "name"}, {"dependsOn", ""}, {"catalogs", ""}},
		rules: []rule{
			{"plugins[].valuesFrom[]", exactlyOf("secretKeyRef", "configMapKeyRef", "targetField"), "a valuesFrom entry sets exactly one of secretKeyRef, configMapKeyRef and targetField"},
			{"plugins[].valuesFrom[]", "!has(self.targetField) || has(self.path)", "targetField needs a path in the values"},
		},
	},
	{
		kind: "TargetCluster", plural: "targetclusters", short: "tc",
		spec: &TargetClusterSpec{}, status: &TargetClusterStatus{},
		columns: []column{{"Version", "string", ".status.kubernetesVersion"}, readyCol, statusCol},
	},
	{
		kind: "ManagedCluster", plural: "managedclusters", short: "mcl",
		spec: &ManagedClusterSpec{}, status: &ManagedClusterStatus{},
		columns: []column{{"Version", "string", ".status.kubernetesVersion"}, readyCol, statusCol},
		rules: []rule{
			{"", exactlyOf("clusterFile", "clusterFileFrom"), "set exactly one of clusterFile and clusterFileFrom"},
		},
	},
	{
		kind: "PluginRollout", plural: "pluginrollouts", short: "prol",
		spec: &PluginRolloutSpec{}, status: &PluginRolloutStatus{},
		columns: []column{readyCol, statusCol},
		lists:   []listType{{"template.plugins", "name"}, {"template.dependsOn", ""}, {"template.catalogs", ""}},
		rules: []rule{
			{"template", "!has(self.target)", "the rollout sets each installation's target: leave template.target empty"},
			{"template.plugins[].valuesFrom[]", exactlyOf("secretKeyRef", "configMapKeyRef", "targetField"), "a valuesFrom entry sets exactly one of secretKeyRef, configMapKeyRef and targetField"},
			{"template.plugins[].valuesFrom[]", "!has(self.targetField) || has(self.path)", "targetField needs a path in the values"},
		},
	},
}

// TestCRDsCurrent keeps crds/ in step with the Go types.
// Regenerate with: go test ./api/controller/v1alpha1 -run TestCRDsCurrent -update
func TestCRDsCurrent(t *testing.T) {
	for _, d := range crdDefs {
		name := d.plural + "." + Group + ".yaml"
		t.Run(name, func(t *testing.T) {
			got := crdYAML(t, d.kind, d.plural, d.short, d.spec, d.status, d.columns, d.rules, d.lists)
			path := filepath.Join("crds", name)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			have, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, have) {
				t.Fatalf("%s is stale; run: go test ./api/controller/v1alpha1 -run TestCRDsCurrent -update", path)
			}
		})
	}
}

func crdYAML(t *testing.T, kind, plural, short string, spec, status any, columns []column, rules []rule, lists []listType) []byte {
	t.Helper()
	specSchema := structural(t, spec)
	find := func(path string) map[string]any {
		at := specSchema
		if path != "" {
			for _, part := range strings.Split(path, ".") {
				items := strings.HasSuffix(part, "[]")
				at = at["properties"].(map[string]any)[strings.TrimSuffix(part, "[]")].(map[string]any)
				if items {
					at = at["items"].(map[string]any)
				}
			}
		}
		return at
	}
	for _, lt := range lists {
		at := find(lt.at)
		if lt.key == "" {
			at["x-kubernetes-list-type"] = "set"
			continue
		}
		at["x-kubernetes-list-type"] = "map"
		at["x-kubernetes-list-map-keys"] = []any{lt.key}
	}
	for _, r := range rules {
		at := find(r.at)
		v, _ := at["x-kubernetes-validations"].([]any)
		at["x-kubernetes-validations"] = append(v, map[string]any{"rule": r.rule, "message": r.message})
	}
	cols := []any{}
	for _, c := range columns {
		cols = append(cols, map[string]any{"name": c.name, "type": c.typ, "jsonPath": c.path})
	}
	cols = append(cols, map[string]any{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
	crd := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata": map[string]any{
			"name":        plural + "." + Group,
			"annotations": map[string]any{"kubeplug.dev/generated-from": "api/controller/v1alpha1 (go test ./api/controller/v1alpha1 -run TestCRDsCurrent -update)"},
		},
		"spec": map[string]any{
			"group": Group,
			"scope": "Namespaced",
			"names": map[string]any{
				"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind),
				"shortNames": []any{short}, "categories": []any{"kubeplug"},
			},
			"versions": []any{map[string]any{
				"name": Version, "served": true, "storage": true,
				"subresources":             map[string]any{"status": map[string]any{}},
				"additionalPrinterColumns": cols,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type":     "object",
					"required": []any{"spec"},
					"properties": map[string]any{
						"apiVersion": map[string]any{"type": "string"},
						"kind":       map[string]any{"type": "string"},
						"metadata":   map[string]any{"type": "object"},
						"spec":       specSchema,
						"status":     structural(t, status),
					},
				}},
			}},
		},
	}
	b, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte("# Generated from api/controller/v1alpha1: go test ./api/controller/v1alpha1 -run TestCRDsCurrent -update\n"), b...)
}

// structural returns the OpenAPI v3 schema of v that a CRD takes: the JSON
// Schema of the type, inlined, without the keywords a structural schema forbids;
// free-form values keep their unknown fields.
func structural(t *testing.T, v any) map[string]any {
	t.Helper()
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Mapper: conditionSchema}
	if err := r.AddGoComments("github.com/kubeplug/kubeplug/api/controller/v1alpha1", "."); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(r.Reflect(v))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	clean(s)
	return s
}

// condition is the schema the CRDs give a metav1.Condition: its fields and
// their JSON, with the limits of the Kubernetes API conventions (apimachinery's
// Go type carries them as kubebuilder markers, which this generator does not
// read).
type condition struct {
	Type               string `json:"type" jsonschema:"maxLength=316"`
	Status             string `json:"status" jsonschema:"enum=True,enum=False,enum=Unknown"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime" jsonschema:"format=date-time"`
	Reason             string `json:"reason" jsonschema:"maxLength=1024"`
	Message            string `json:"message" jsonschema:"maxLength=32768"`
}

// conditionSchema maps metav1.Condition to condition's schema.
func conditionSchema(t reflect.Type) *jsonschema.Schema {
	if t != reflect.TypeFor[metav1.Condition]() {
		return nil
	}
	s := (&jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true}).Reflect(&condition{})
	s.Description = "Condition is a metav1.Condition."
	return s
}

func clean(s map[string]any) {
	delete(s, "$schema")
	delete(s, "$id")
	if ap, ok := s["additionalProperties"].(bool); ok && !ap {
		delete(s, "additionalProperties")
	}
	if d, ok := s["description"].(string); ok {
		s["description"] = strings.Join(strings.Fields(d), " ")
	}
	if s["type"] == "object" && s["properties"] == nil && s["additionalProperties"] == nil {
		s["x-kubernetes-preserve-unknown-fields"] = true
	}
	if p, ok := s["properties"].(map[string]any); ok {
		for _, v := range p {
			clean(v.(map[string]any))
		}
	}
	if it, ok := s["items"].(map[string]any); ok {
		clean(it)
	}
	if ap, ok := s["additionalProperties"].(map[string]any); ok {
		clean(ap)
	}
}

// TestControllerPluginCRDsCurrent keeps the built-in kubeplug-controller
// plugin's copy of the CRDs in step with crds/.
// Regenerate with: go test ./api/controller/v1alpha1 -run TestControllerPluginCRDsCurrent -update
func TestControllerPluginCRDsCurrent(t *testing.T) {
	var want bytes.Buffer
	want.WriteString("# The CRDs of api/controller/v1alpha1/crds, copied by: go test ./api/controller/v1alpha1 -run TestControllerPluginCRDsCurrent -update\n")
	for _, crd := range CRDs() {
		want.WriteString("---\n")
		want.Write(crd)
	}
	path := filepath.Join("..", "..", "..", "plugins", "kubeplug-controller", "manifests", "crds.yaml")
	if *update {
		if err := os.WriteFile(path, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(have, want.Bytes()) {
		t.Fatalf("%s is stale; run: go test ./api/controller/v1alpha1 -run TestControllerPluginCRDsCurrent -update", path)
	}
}
