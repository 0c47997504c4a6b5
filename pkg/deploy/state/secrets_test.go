package state_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/state"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Run(m)) }

func newStore(t *testing.T, historyMax int) (*state.Secrets, string) {
	t.Helper()
	c, err := kube.New(testcluster.RESTConfig(t), kube.Options{Logger: testcluster.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ns := testcluster.Namespace(t)
	return state.NewSecrets(c, ns, historyMax), ns
}

// configMaps returns n ConfigMaps of incompressible data, enough to need several
// chunks when n is large.
func configMaps(n int) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, n)
	for i := range out {
		data := map[string]any{}
		for j := range 8 {
			data[fmt.Sprint("k", j)] = fmt.Sprintf("%x", []byte(fmt.Sprint(i*131+j*7919, strings.Repeat("x", i%17))))
		}
		out[i] = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprint("cm-", i), "namespace": "app"},
			"data":     data,
		}}
	}
	return out
}

// TestSecretsStoreRoundTrip writes revisions through the Store contract and reads
// them back: objects split in chunks and joined again, history oldest first and
// bounded, the newest revision per plugin, a head-only rewrite keeping the chunks,
// and Delete leaving nothing behind.
//
// On shared heads (a controller's stores) the same holds, and the cleanup
// knows the chunks from the shared view.
func TestSecretsStoreRoundTrip(t *testing.T) {
	t.Run("alone", func(t *testing.T) { roundTrip(t, nil) })
	h := state.NewHeads()
	t.Run("shared", func(t *testing.T) {
		roundTrip(t, h)
		if n := h.Lists(); n != 1 {
			t.Errorf("the shared heads were listed %d times, want once", n)
		}
	})
}

func roundTrip(t *testing.T, h *state.Heads) {
	s, ns := newStore(t, 2)
	if h != nil {
		s.ShareHeads(h)
		if _, err := s.Histories(t.Context()); err != nil { // fills h
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	c := testcluster.Client(t)
	if _, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	old, oldInline := state.ChunkSize, state.InlineMax
	state.ChunkSize, state.InlineMax = 4<<10, 0 // chunks, however small
	t.Cleanup(func() { state.ChunkSize, state.InlineMax = old, oldInline })

	objs := configMaps(300)
	for rev := 1; rev <= 3; rev++ {
		r := &state.Record{Plugin: "web", Revision: rev, Version: fmt.Sprint("1.0.", rev), Phase: state.PhaseApplying, Objects: kube.RefsOf(objs)}
		if err := s.Write(ctx, r, objs); err != nil {
			t.Fatal(err)
		}
		if len(r.Chunks) < 2 || r.Count != len(objs) || !strings.HasPrefix(r.Manifests, "sha256:") {
			t.Fatalf("revision %d: chunks %d, count %d, manifests %q", rev, len(r.Chunks), r.Count, r.Manifests)
		}
	}
	other := &state.Record{Plugin: "db", Revision: 1, Version: "2.0.0", Phase: state.PhaseReady}
	if err := s.Write(ctx, other, []*unstructured.Unstructured{}); err != nil {
		t.Fatal(err)
	}

	hist, err := s.History(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].Revision != 2 || hist[1].Revision != 3 {
		t.Fatalf("history %v, want revisions 2 and 3 (history bounded at 2)", revisions(hist))
	}
	got, err := s.Objects(ctx, hist[1])
	if err != nil {
		t.Fatal(err)
	}
	if a, b := mustJSON(t, got), mustJSON(t, objs); a != b {
		t.Errorf("objects read back differ from those written")
	}

	// A head-only write changes the phase and keeps the chunks.
	head := hist[1].Clone()
	head.Phase = state.PhaseReady
	if err := s.Write(ctx, head, nil); err != nil {
		t.Fatal(err)
	}
	latest, err := s.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(latest) != 2 || latest[0].Plugin != "db" || latest[1].Plugin != "web" || latest[1].Phase != state.PhaseReady || latest[1].Revision != 3 {
		t.Fatalf("latest %v", latest)
	}
	if _, err := s.Objects(ctx, latest[1]); err != nil {
		t.Errorf("objects after a head-only write: %v", err)
	}

	// Chunks of collected revisions are gone; only the kept revisions' remain.
	secrets, err := c.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelPlugin + "=web"})
	if err != nil {
		t.Fatal(err)
	}
	want := 2 + len(hist[0].Chunks) + len(hist[1].Chunks)
	if len(secrets.Items) != want {
		t.Errorf("%d record Secrets of web, want %d (2 heads and their chunks)", len(secrets.Items), want)
	}
	for _, sec := range secrets.Items {
		if sec.Type != state.RecordType {
			t.Errorf("Secret %s has type %s", sec.Name, sec.Type)
		}
	}

	if err := s.Delete(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if hist, err := s.History(ctx, "web"); err != nil || len(hist) != 0 {
		t.Errorf("history after Delete: %v, %v", revisions(hist), err)
	}
	secrets, err = c.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelPlugin + "=web"})
	if err != nil || len(secrets.Items) != 0 {
		t.Errorf("%d record Secrets left after Delete (%v)", len(secrets.Items), err)
	}
	if _, err := s.Objects(ctx, &state.Record{Plugin: "none", Revision: 1}); !errors.Is(err, state.ErrNoObjects) {
		t.Errorf("objects of a revision without chunks: %v, want ErrNoObjects", err)
	}
}

func revisions(recs []*state.Record) []int {
	out := make([]int, len(recs))
	for i, r := range recs {
		out[i] = r.Revision
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
