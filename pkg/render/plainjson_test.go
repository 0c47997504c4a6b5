package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/model"
)

// roundTrip is what render did to every manifest object before plainCopy:
// json.Marshal, then a decode with UseNumber.
func roundTrip(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	err = dec.Decode(&out)
	return out, err
}

// TestPlainCopyIsTheRoundTrip: what plainCopy copies is exactly what the JSON
// round trip makes, and a copy shares no map or list with the original; what
// the round trip would change or refuse, plainCopy leaves to it.
func TestPlainCopyIsTheRoundTrip(t *testing.T) {
	same := []any{
		nil, true, false, "", "plain", "<html> & \"quotes\" \\ \t\n\x01", "ünïcødé \u2028",
		json.Number("0"), json.Number("-12"), json.Number("1.5e-7"), json.Number("1E+300"), json.Number("123456789012345678901234567890"),
		int64(math.MinInt64), int64(math.MaxInt64), 42, -7,
		map[string]any{}, []any{},
		map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "labels": map[string]any{"a/b": "c"}},
			"data": map[string]any{"k": "v"}, "list": []any{json.Number("1"), nil, true, []any{}, map[string]any{"": "empty key"}}},
	}
	for i, v := range same {
		want, err := roundTrip(v)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := plainCopy(v)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("value %d (%#v): %#v (%v), want %#v", i, v, got, ok, want)
		}
	}
	orig := same[len(same)-1].(map[string]any)
	c, _ := plainCopy(orig)
	c.(map[string]any)["metadata"].(map[string]any)["name"] = "changed"
	c.(map[string]any)["list"].([]any)[0] = "changed"
	if orig["metadata"].(map[string]any)["name"] != "x" || orig["list"].([]any)[0] != json.Number("1") {
		t.Error("the copy shares maps or lists with the original")
	}
	for i, v := range []any{
		1.5, float32(1), math.NaN(), "bad \xff utf8", map[string]any{"bad \xff key": "v"}, json.Number(""), json.Number("01"), json.Number("1."),
		json.Number("+1"), json.Number("1e"), json.Number("0x10"), json.Number(" 1"), json.Number("Inf"),
		map[string]any(nil), []any(nil), []string{"typed"}, map[string]string{"typed": "map"}, struct{}{}, uint64(1),
		map[string]any{"deep": []any{map[string]any{"f": 2.5}}},
	} {
		if got, ok := plainCopy(v); ok {
			t.Errorf("value %d (%#v): copied as %#v, want it left to the round trip", i, v, got)
		}
	}
}

// TestValidNumberIsEncodingJSONs: validNumber accepts what json.Marshal
// accepts as a json.Number, and no more.
func TestValidNumberIsEncodingJSONs(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-1", "10", "0.5", "-0.5", "1.25", "1e5", "1E5", "1e+5", "1e-5", "1.5e10", "12345678901234567890",
		"", "-", "+1", "01", "00", "1.", ".5", "1e", "1e+", "1e-", "1.e5", "0x1", "1_000", "Inf", "NaN", " 1", "1 ", "1a", "--1", "1e5.5", "١"} {
		_, err := json.Marshal(json.Number(s))
		if got, want := validNumber(s), err == nil && s != ""; got != want {
			t.Errorf("validNumber(%q) = %v, want %v (json.Marshal: %v)", s, got, want, err)
		}
	}
}

func FuzzValidNumber(f *testing.F) {
	for _, s := range []string{"0", "-1.5e+3", "01", "1e", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := json.Marshal(json.Number(s))
		if got, want := validNumber(s), err == nil && s != ""; got != want {
			t.Fatalf("validNumber(%q) = %v, want %v", s, got, want)
		}
	})
}

// TestPlainRefIsRef: the patch target read from a decoded object is what ref
// reads from its JSON, except where a key matches only in case, which
// plainRef declines.
func TestPlainRefIsRef(t *testing.T) {
	for i, obj := range []map[string]any{
		{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web", "namespace": "prod"}},
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "web"}},
		{},
		{"apiVersion": json.Number("1"), "kind": true, "metadata": "not a map"},
		{"kind": "ConfigMap", "metadata": nil},
		{"kind": "ConfigMap", "metadata": map[string]any{"name": json.Number("3"), "namespace": []any{"x"}}},
	} {
		doc, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		want := (&kubeObject{doc: doc}).ref()
		if got, ok := plainRef(obj); !ok || got != want {
			t.Errorf("object %d: %+v (%v), want %+v", i, got, ok, want)
		}
	}
	for i, obj := range []map[string]any{
		{"Kind": "ConfigMap"}, {"APIVERSION": "v1", "kind": "x"}, {"kind": "x", "Metadata": map[string]any{"name": "y"}},
		{"kind": "x", "metadata": map[string]any{"NAME": "y"}}, {"kind": "x", "metadata": map[string]any{"nameSpace": "y"}},
		{"\u212aind": "Kelvin"}, // KELVIN SIGN folds to k
	} {
		if got, ok := plainRef(obj); ok {
			t.Errorf("object %d (%v): read as %+v, want it left to ref", i, obj, got)
		}
	}
}

// benchModel is n ConfigMaps from 20 plugins as the declarative runtime
// contributes them, like BenchmarkApplySizes (test/bench).
func benchModel(n int) *model.Model {
	m := model.New()
	for i := range n {
		p := fmt.Sprintf("p%02d", i%20)
		m.Kubernetes.Objects = append(m.Kubernetes.Objects, model.Object{By: p, Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-cm%03d", p, i), "namespace": "bench"},
			"data":     map[string]any{"plugin": p, "index": fmt.Sprint(i), "payload": strings.Repeat("x", 256)},
		}})
	}
	return m
}

// TestContentIsTheRoundTrip: Content's objects are what the JSON round trip
// made of the model's.
func TestContentIsTheRoundTrip(t *testing.T) {
	m := benchModel(40)
	m.Kubernetes.Objects[3].Object["spec"] = map[string]any{"f": 2.5, "n": int64(3), "typed": []string{"a"}}
	m.Kubernetes.Objects[5].Object["Kind"] = "odd"
	objs, _, l := Content(t.Context(), Input{ClusterName: "c", KubernetesVersion: "1.37.1", Model: m})
	if l.HasFatal() {
		t.Fatal(l)
	}
	var got []any
	for _, p := range []string{"p00", "p01", "p02", "p03", "p04", "p05", "p06", "p07", "p08", "p09", "p10", "p11", "p12", "p13", "p14", "p15", "p16", "p17", "p18", "p19"} {
		for _, o := range objs[p] {
			got = append(got, any(o))
		}
	}
	for i, o := range m.Kubernetes.Objects {
		want, err := roundTrip(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		j := (i%20)*2 + i/20 // by plugin, in model order
		if !reflect.DeepEqual(any(map[string]any(got[j].(map[string]any))), want) {
			t.Errorf("object %d: %#v, want %#v", i, got[j], want)
		}
	}
}

// BenchmarkContent renders 1,000 manifest objects from 20 plugins for the
// deployer:
//
//	go test ./pkg/render -run '^$' -bench Content
func BenchmarkContent(b *testing.B) {
	in := Input{ClusterName: "c", KubernetesVersion: "1.37.1", Model: benchModel(1000)}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, l := Content(b.Context(), in); l.HasFatal() {
			b.Fatal(l)
		}
	}
}
