package crd

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/pkg/deploy/internal/deploytest"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
)

func prop(m map[string]any, name string) map[string]any {
	return m["properties"].(map[string]any)[name].(map[string]any)
}

func addVersion(m map[string]any, name string, served bool) {
	spec := m["spec"].(map[string]any)
	v := runtimeCopy(spec["versions"].([]any)[0].(map[string]any))
	v["name"], v["served"], v["storage"] = name, served, false
	spec["versions"] = append(spec["versions"].([]any), v)
}

func runtimeCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

func TestCompareCRDs(t *testing.T) {
	for _, tc := range []struct {
		name string
		// live edits the live CRD (nil: deploytest.WidgetsV1 as is); desired edits the new one.
		live, desired func(m map[string]any)
		want          []string
	}{
		{name: "unchanged"},
		{name: "description, printer column, new version, new field and enum value are safe", desired: func(m map[string]any) {
			s := deploytest.V1Spec(m, 0)
			prop(s, "size")["description"] = "how big, in units"
			prop(s, "mode")["enum"] = []any{"fast", "slow", "medium"}
			s["properties"].(map[string]any)["color"] = map[string]any{"type": "string"}
			m["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["additionalPrinterColumns"] = []any{map[string]any{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}}
			addVersion(m, "v2", true)
		}},
		{name: "type changed", desired: func(m map[string]any) {
			prop(deploytest.V1Spec(m, 0), "size")["type"] = "string"
		}, want: []string{"CustomResourceDefinition widgets.example.com: version v1: field .spec.size: type changed from integer to string"}},
		{name: "field removed", desired: func(m map[string]any) {
			delete(deploytest.V1Spec(m, 0)["properties"].(map[string]any), "mode")
		}, want: []string{"CustomResourceDefinition widgets.example.com: version v1: field .spec.mode: removed (its values in existing objects would be pruned)"}},
		{name: "field removed inside array items and map values", desired: func(m map[string]any) {
			s := deploytest.V1Spec(m, 0)
			delete(prop(s, "ports")["items"].(map[string]any)["properties"].(map[string]any), "port")
			delete(prop(s, "labels")["additionalProperties"].(map[string]any)["properties"].(map[string]any), "value")
		}, want: []string{
			"CustomResourceDefinition widgets.example.com: version v1: field .spec.labels.*.value: removed (its values in existing objects would be pruned)",
			"CustomResourceDefinition widgets.example.com: version v1: field .spec.ports[*].port: removed (its values in existing objects would be pruned)",
		}},
		{name: "new required field", desired: func(m map[string]any) {
			s := deploytest.V1Spec(m, 0)
			s["properties"].(map[string]any)["color"] = map[string]any{"type": "string"}
			s["required"] = []any{"size", "color"}
		}, want: []string{"CustomResourceDefinition widgets.example.com: version v1: field .spec.color: new required field (existing objects may not set it)"}},
		{name: "enum narrowed", desired: func(m map[string]any) {
			prop(deploytest.V1Spec(m, 0), "mode")["enum"] = []any{"fast"}
		}, want: []string{`CustomResourceDefinition widgets.example.com: version v1: field .spec.mode: enum narrowed: "slow" no longer allowed`}},
		{name: "preserve-unknown-fields removed", desired: func(m map[string]any) {
			delete(prop(deploytest.V1Spec(m, 0), "config"), "x-kubernetes-preserve-unknown-fields")
		}, want: []string{"CustomResourceDefinition widgets.example.com: version v1: field .spec.config: x-kubernetes-preserve-unknown-fields removed (unknown fields of existing objects would be pruned)"}},
		{name: "scope changed", desired: func(m map[string]any) {
			m["spec"].(map[string]any)["scope"] = "Cluster"
		}, want: []string{"CustomResourceDefinition widgets.example.com: scope changed from Namespaced to Cluster"}},
		{name: "stored version removed", live: func(m map[string]any) {
			addVersion(m, "v2", true)
		}, desired: func(m map[string]any) {
			addVersion(m, "v2", true)
			spec := m["spec"].(map[string]any)
			spec["versions"] = spec["versions"].([]any)[1:]
		}, want: []string{"CustomResourceDefinition widgets.example.com: version v1: removed, but objects are stored in it (status.storedVersions); migrate them and drop it from storedVersions first"}},
		{name: "served version removed, unserved one removed safely", live: func(m map[string]any) {
			addVersion(m, "v1beta1", true)
			addVersion(m, "v1alpha1", false)
		}, want: []string{"CustomResourceDefinition widgets.example.com: version v1beta1: removed while served"}},
		{name: "served version no longer served", live: func(m map[string]any) {
			addVersion(m, "v1beta1", true)
		}, desired: func(m map[string]any) {
			addVersion(m, "v1beta1", false)
		}, want: []string{"CustomResourceDefinition widgets.example.com: version v1beta1: no longer served"}},
		{name: "a field moved under preserve-unknown-fields is kept", desired: func(m map[string]any) {
			s := deploytest.V1Spec(m, 0)
			delete(s["properties"].(map[string]any), "mode")
			s["x-kubernetes-preserve-unknown-fields"] = true
		}},
		{name: "every finding is listed", desired: func(m map[string]any) {
			s := deploytest.V1Spec(m, 0)
			prop(s, "size")["type"] = "string"
			delete(s["properties"].(map[string]any), "mode")
			m["spec"].(map[string]any)["scope"] = "Cluster"
		}, want: []string{
			"CustomResourceDefinition widgets.example.com: scope changed from Namespaced to Cluster",
			"CustomResourceDefinition widgets.example.com: version v1: field .spec.mode: removed (its values in existing objects would be pruned)",
			"CustomResourceDefinition widgets.example.com: version v1: field .spec.size: type changed from integer to string",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live, desired := deploytest.CRD(t, deploytest.WidgetsV1, tc.live), deploytest.CRD(t, deploytest.WidgetsV1, tc.desired)
			delete(desired, "status")
			var got []string
			for _, f := range CompareCRDs(live, desired) {
				got = append(got, f.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestUnsafeCRDChangeErrorListsEveryFinding(t *testing.T) {
	err := error(&kube.UnitError{Plugin: "widgets", Err: &UnsafeCRDChangeError{Findings: []CRDFinding{
		{CRD: "widgets.example.com", Version: "v1", Field: ".spec.size", Message: "type changed from integer to string"},
		{CRD: "widgets.example.com", Message: "scope changed from Namespaced to Cluster"},
	}}})
	if !errors.Is(err, ErrUnsafeCRDChange) {
		t.Errorf("%v does not match ErrUnsafeCRDChange", err)
	}
	want := "plugin widgets: CustomResourceDefinition widgets.example.com: version v1: field .spec.size: type changed from integer to string; " +
		"CustomResourceDefinition widgets.example.com: scope changed from Namespaced to Cluster (refused"
	if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "--force-crd-changes") {
		t.Errorf("error = %q", err)
	}
}
