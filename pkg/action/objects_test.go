package action

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestUnstructuredOfIsTheJSONRoundTrip: converting a rendered object's numbers
// directly gives what encoding it to JSON and decoding it as an unstructured
// object gives, value and type.
func TestUnstructuredOfIsTheJSONRoundTrip(t *testing.T) {
	type odd struct {
		A int `json:"a"`
	}
	o := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "labels": map[string]any{}},
		"spec": map[string]any{
			"ints":   []any{json.Number("0"), json.Number("-7"), json.Number("9223372036854775807"), 3, int32(4), int64(5)},
			"floats": []any{json.Number("1.5"), json.Number("1.0"), json.Number("1e3"), json.Number("12345678901234567890"), 2.0, 2.5, 1e21, float32(0.25)},
			"other":  []any{nil, true, "s", "", []any{}, map[string]any{"n": nil}},
			"struct": odd{A: 1},
			"uint":   uint64(18446744073709551615),
		},
	}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	want := &unstructured.Unstructured{}
	if err := want.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	got, err := unstructuredOf(o)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Object, want.Object) {
		t.Errorf("direct conversion differs from the JSON round trip:\n got  %#v\n want %#v", got.Object, want.Object)
	}
	if _, err := unstructuredOf(map[string]any{"apiVersion": "v1"}); err == nil {
		t.Error("an object without a kind converted")
	}
}

func BenchmarkUnstructuredOf(b *testing.B) {
	o := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "namespace": "y", "labels": map[string]any{"a": "b"}},
		"data": map[string]any{"plugin": "1", "index": "2", "payload": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			_, _ = unstructuredOf(o)
		}
	})
	b.Run("json-round-trip", func(b *testing.B) {
		for b.Loop() {
			raw, _ := json.Marshal(o)
			u := &unstructured.Unstructured{}
			_ = u.UnmarshalJSON(raw)
		}
	})
}
