package state_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/state"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countingStore is a store whose requests are counted as "VERB part" (the
// label selector's part for a LIST, "head" or "chunk").
func countingStore(t *testing.T, ns string, historyMax int) (*state.Secrets, func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	cfg := testcluster.RESTConfig(t)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			what := r.Method
			if sel := r.URL.Query().Get("labelSelector"); sel != "" {
				what = "LIST"
				for _, p := range []string{"head", "chunk"} {
					if strings.Contains(sel, state.LabelPart+"="+p) {
						what += " " + p
					}
				}
			}
			mu.Lock()
			counts[what]++
			mu.Unlock()
			return rt.RoundTrip(r)
		})
	}
	c, err := kube.New(cfg, kube.Options{Logger: testcluster.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return state.NewSecrets(c, ns, historyMax), func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := counts
		counts = map[string]int{}
		return out
	}
}

// TestInlineRevisionsAndWhatTheStoreKnows: a small revision keeps its objects
// in its head (no chunk), a head written again without objects carries them, a
// store that does not have them refuses to write such a head; after Histories,
// writes need no LIST of heads and one LIST of chunks for the store's life.
func TestInlineRevisionsAndWhatTheStoreKnows(t *testing.T) {
	ns := testcluster.Namespace(t)
	ctx := t.Context()
	s, take := countingStore(t, ns, 2)
	if _, err := s.Histories(ctx); err != nil {
		t.Fatal(err)
	}
	take()
	objs := configMaps(5)
	for rev := 1; rev <= 3; rev++ {
		r := &state.Record{Plugin: "small", Revision: rev, Version: "1.0.0", Phase: state.PhaseApplying, Objects: kube.RefsOf(objs)}
		if err := s.Write(ctx, r, objs); err != nil {
			t.Fatal(err)
		}
		if !r.Inline || len(r.Chunks) != 0 || r.Count != 5 {
			t.Fatalf("revision %d: inline %v, chunks %v, count %d; want inline, no chunks, 5", rev, r.Inline, r.Chunks, r.Count)
		}
		r.Phase = state.PhaseReady
		if err := s.Write(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	// 3 revisions, each a head with its objects and a head rewritten; the first
	// revision collected at the third (history 2); one LIST of chunks.
	got := take()
	want := map[string]int{"PATCH": 6, "DELETE": 1, "LIST chunk": 1}
	if len(got) != len(want) || got["PATCH"] != 6 || got["DELETE"] != 1 || got["LIST chunk"] != 1 {
		t.Errorf("requests of 3 inline revisions after Histories: %v, want %v", got, want)
	}

	// A fresh store (nothing known) reads the objects back from the head, and
	// a head rewritten without objects keeps them.
	fresh, _ := countingStore(t, ns, 2)
	hist, err := fresh.History(ctx, "small")
	if err != nil || len(hist) != 2 || hist[1].Revision != 3 || !hist[1].Inline {
		t.Fatalf("history %v (%v), want revisions 2 and 3, inline", revisions(hist), err)
	}
	back, err := fresh.Objects(ctx, hist[1])
	if err != nil || mustJSON(t, back) != mustJSON(t, objs) {
		t.Fatalf("objects read back from the head: %v", err)
	}
	again, _ := countingStore(t, ns, 2)
	head := hist[1].Clone()
	head.Message = "rewritten"
	if err := again.Write(ctx, head, nil); err != nil {
		t.Fatalf("a head rewritten by a store that read nothing: %v", err)
	}
	if back, err := fresh.Objects(ctx, head); err != nil || len(back) != 5 {
		t.Errorf("objects after the head was rewritten: %d, %v", len(back), err)
	}
	sec, err := testcluster.Client(t).CoreV1().Secrets(ns).Get(ctx, "kubeplug.small.v3", metav1.GetOptions{})
	if err != nil || len(sec.Data["objects"]) == 0 {
		t.Errorf("the rewritten head holds no objects (%v)", err)
	}
	// An inline head whose objects are nowhere is not written.
	lost := &state.Record{Plugin: "small", Revision: 9, Phase: state.PhaseReady, Inline: true, Manifests: "sha256:00"}
	if err := again.Write(ctx, lost, nil); err == nil {
		t.Error("an inline head without its objects was written")
	}
	if _, err := testcluster.Client(t).CoreV1().Secrets(ns).Get(ctx, "kubeplug.small.v9", metav1.GetOptions{}); err == nil {
		t.Error("the refused head exists")
	}

	// Large objects still go to chunks, and an empty revision is inline.
	old := state.InlineMax
	state.InlineMax = 64
	t.Cleanup(func() { state.InlineMax = old })
	big := &state.Record{Plugin: "big", Revision: 1, Phase: state.PhaseApplying, Objects: kube.RefsOf(objs)}
	if err := s.Write(ctx, big, objs); err != nil || big.Inline || len(big.Chunks) != 1 {
		t.Errorf("a revision over InlineMax: inline %v, chunks %v (%v)", big.Inline, big.Chunks, err)
	}
	empty := &state.Record{Plugin: "empty", Revision: 1, Phase: state.PhaseReady}
	if err := s.Write(ctx, empty, []*unstructured.Unstructured{}); err != nil || !empty.Inline {
		t.Errorf("an empty revision: inline %v (%v)", empty.Inline, err)
	}
	if got, err := s.Objects(ctx, empty); err != nil || len(got) != 0 {
		t.Errorf("objects of the empty revision: %v, %v", got, err)
	}
}
