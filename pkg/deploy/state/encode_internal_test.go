package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
)

// benchObjects are n ConfigMaps as the deployer records them (numbers
// converted to int64), like a plugin of BenchmarkApplySizes (test/bench).
func benchObjects(n int) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, n)
	for i := range out {
		out[i] = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("p00-cm%03d", i), "namespace": "bench", "labels": map[string]any{"app.kubernetes.io/managed-by": "kubeplug", "kubeplug.dev/plugin": "p00"},
				"annotations": map[string]any{"kubeplug.dev/applied-digest": "0123456789abcdef0123456789abcdef"}},
			"data": map[string]any{"plugin": "0", "index": fmt.Sprint(i), "payload": strings.Repeat("x", 256)},
		}}
	}
	return out
}

// TestMarshalObjectsIsJSONMarshal: the stored objects are encoding/json's
// bytes of the list, whatever the objects hold (what jsonenc does not write
// falls back to encoding/json for the whole list).
func TestMarshalObjectsIsJSONMarshal(t *testing.T) {
	odd := benchObjects(3)
	odd[1].Object["spec"] = map[string]any{"n": json.Number("12"), "f": 1.5, "i": int64(-3), "s": "<&> \xff", "l": []any{nil, true}}
	nan := benchObjects(2)
	nan[0].Object["spec"] = math.NaN()
	for i, objs := range [][]*unstructured.Unstructured{
		benchObjects(50), {}, nil, odd, {{}}, {nil}, {{Object: map[string]any{}}}, {{Object: map[string]any{"spec": []string{"typed"}}}}, nan,
	} {
		want, wantErr := json.Marshal(objs)
		got, err := marshalObjects(objs)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Errorf("case %d: %s (%v), want %s (%v)", i, got, err, want, wantErr)
		}
	}
}

// BenchmarkEncodeObjects is what a revision's record costs to encode for 50
// objects: the objects (JSON, gzip) and the head (JSON, gzip).
//
//	go test ./pkg/deploy/state -run '^$' -bench EncodeObjects
func BenchmarkEncodeObjects(b *testing.B) {
	objs := benchObjects(50)
	s := &Secrets{}
	r := &Record{Plugin: "p00", Revision: 1, Version: "1.0.0", Phase: PhaseApplying}
	for _, o := range objs {
		r.Objects = append(r.Objects, kube.RefOf(o))
	}
	b.ReportAllocs()
	for b.Loop() {
		payload, err := s.encodeObjects(b.Context(), r, objs)
		if err != nil {
			b.Fatal(err)
		}
		raw, err := json.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(payload)), "payload-bytes")
		b.ReportMetric(float64(len(gz(raw))), "head-bytes")
	}
}
