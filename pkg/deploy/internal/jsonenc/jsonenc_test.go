package jsonenc

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestAppendIsMarshal: the digest's bytes are encoding/json's, for every
// kind of value an unstructured object holds, and the values it does not
// handle are reported, not written wrong.
func TestAppendIsMarshal(t *testing.T) {
	values := []any{
		nil, true, false, "", "plain", `quote " and \ backslash`, "<html> & co", "tab\tnew\nline\x01", "ünïcødé", "line\u2028sep", "bad \xff utf8",
		int64(0), int64(-1), int64(math.MaxInt64), int64(math.MinInt64), 42,
		0.0, math.Copysign(0, -1), 1.5, 2.0, 1e20, 1e21, 1e-6, 1e-7, 123456789.125, 1e-300, math.MaxFloat64, -3.25e-9,
		map[string]any{}, map[string]any(nil), []any{}, []any(nil),
		map[string]any{"b": int64(1), "a": []any{"x", 2.5, nil, map[string]any{"z": true, "<": "&"}}, "": "empty key", "é": "key"},
	}
	obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "labels": map[string]any{"app.kubernetes.io/name": "x"}}, "values": values}
	for i, v := range append(values, any(obj)) {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := Append(nil, v)
		if !ok || string(got) != string(want) {
			t.Errorf("value %d (%#v): %s (%v), want %s", i, v, got, ok, want)
		}
	}
	for _, v := range []any{math.NaN(), math.Inf(1), []any{struct{}{}}, map[string]any{"n": json.Number("1")}, float32(1)} {
		if _, ok := Append(nil, v); ok {
			t.Errorf("%#v: handled, want left to encoding/json", v)
		}
	}
}

func FuzzAppendIsMarshal(f *testing.F) {
	f.Add("a<b>", 1.5, int64(3))
	f.Fuzz(func(t *testing.T, s string, x float64, n int64) {
		v := map[string]any{s: []any{s, x, n, map[string]any{"k": s}}}
		want, err := json.Marshal(v)
		got, ok := Append(nil, v)
		if err != nil {
			if ok {
				t.Fatalf("%#v: written as %s, but encoding/json fails: %v", v, got, err)
			}
			return
		}
		if !ok || string(got) != string(want) {
			t.Fatalf("%#v: %s (%v), want %s", v, got, ok, want)
		}
	})
}

func BenchmarkAppend(b *testing.B) {
	o := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "p00-cm00", "namespace": "bench", "labels": map[string]any{"app.kubernetes.io/managed-by": "kubeplug", "kubeplug.dev/plugin": "p00"}},
		"data": map[string]any{"plugin": "1", "index": "2", "payload": strings.Repeat("x", 256)}}
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			_, _ = Append(make([]byte, 0, 512), o)
		}
	})
	b.Run("marshal", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(o)
		}
	})
}
