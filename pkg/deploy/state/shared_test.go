package state_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/state"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestSharedHeads: stores that share Heads list the heads once between them,
// see each other's writes and deletes without listing again (within a history
// bounded as the store bounds it), and see another writer's only after
// Invalidate.
func TestSharedHeads(t *testing.T) {
	c, err := kube.New(testcluster.RESTConfig(t), kube.Options{Logger: testcluster.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ns := testcluster.Namespace(t)
	ctx := t.Context()
	h := state.NewHeads()
	shared := func() *state.Secrets {
		s := state.NewSecrets(c, ns, 2)
		s.ShareHeads(h)
		return s
	}
	versions := func(s *state.Secrets) string {
		hs, err := s.Histories(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, p := range []string{"a", "b", "cli"} {
			for _, r := range hs[p] {
				out += fmt.Sprintf("%s@%s ", p, r.Version)
			}
		}
		return out
	}
	write := func(s *state.Secrets, plugin string, rev int) {
		t.Helper()
		r := &state.Record{Plugin: plugin, Revision: rev, Version: fmt.Sprint("1.0.", rev), Phase: state.PhaseReady}
		if err := s.Write(ctx, r, []*unstructured.Unstructured{}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := shared(), shared()
	write(a, "a", 1)
	if got := versions(b); got != "a@1.0.1 " {
		t.Fatalf("b reads %q", got)
	}
	write(b, "b", 1)
	for rev := 2; rev <= 3; rev++ { // the oldest beyond 2 collected
		write(a, "a", rev)
	}
	if got, want := versions(shared()), "a@1.0.2 a@1.0.3 b@1.0.1 "; got != want {
		t.Fatalf("a new store reads %q, want %q", got, want)
	}
	if err := b.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got, want := versions(a), "a@1.0.2 a@1.0.3 "; got != want {
		t.Fatalf("after b's delete, a reads %q, want %q", got, want)
	}
	if n := h.Lists(); n != 1 {
		t.Errorf("the shared heads were listed %d times, want 1", n)
	}
	// Another writer (the CLI's own store) is seen once the holder of the lease
	// invalidates.
	write(state.NewSecrets(c, ns, 2), "cli", 1)
	if got := versions(a); got != "a@1.0.2 a@1.0.3 " {
		t.Fatalf("before Invalidate, a reads %q", got)
	}
	h.Invalidate()
	if got, want := versions(a), "a@1.0.2 a@1.0.3 cli@1.0.1 "; got != want {
		t.Errorf("after Invalidate, a reads %q, want %q", got, want)
	}
	if n := h.Lists(); n != 2 {
		t.Errorf("listed %d times, want 2", n)
	}
}

// TestSharedHeadsByOwner: on shared heads, HistoriesFor reads the plugins an
// owner's newest revisions name and the plugins asked for, kept current by
// writes that move a plugin to another owner and by deletes, without a LIST
// after the first.
func TestSharedHeadsByOwner(t *testing.T) {
	c, err := kube.New(testcluster.RESTConfig(t), kube.Options{Logger: testcluster.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ns := testcluster.Namespace(t)
	ctx := t.Context()
	h := state.NewHeads()
	s := state.NewSecrets(c, ns, 3)
	s.ShareHeads(h)
	write := func(plugin, owner string, rev int) {
		t.Helper()
		r := &state.Record{Plugin: plugin, Owner: owner, Revision: rev, Version: fmt.Sprint("1.0.", rev), Phase: state.PhaseReady}
		if err := s.Write(ctx, r, []*unstructured.Unstructured{}); err != nil {
			t.Fatal(err)
		}
	}
	of := func(owner string, plugins ...string) string {
		t.Helper()
		hs, err := s.HistoriesFor(ctx, owner, plugins)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for p, h := range hs {
			for _, r := range h {
				out = append(out, fmt.Sprintf("%s@%d:%s", p, r.Revision, r.Owner))
			}
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	write("a", "inst/x", 1)
	write("b", "inst/y", 1)
	write("c", "", 1)
	for _, tc := range []struct{ owner, plugins, want string }{
		{"inst/x", "", "a@1:inst/x"},
		{"inst/x", "c", "a@1:inst/x c@1:"},
		{"inst/x", "nothing", "a@1:inst/x"},
		{"", "", "c@1:"},
	} {
		if got := of(tc.owner, strings.Fields(tc.plugins)...); got != tc.want {
			t.Errorf("HistoriesFor(%q, %q) = %q, want %q", tc.owner, tc.plugins, got, tc.want)
		}
	}
	write("c", "inst/x", 2) // adopted by x
	if got, want := of("inst/x"), "a@1:inst/x c@1: c@2:inst/x"; got != want {
		t.Errorf("after the adoption, x reads %q, want %q", got, want)
	}
	if got := of(""); got != "" {
		t.Errorf("after the adoption, the CLI reads %q, want nothing", got)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got, want := of("inst/x"), "c@1: c@2:inst/x"; got != want {
		t.Errorf("after a's delete, x reads %q, want %q", got, want)
	}
	if n := h.Lists(); n != 1 {
		t.Errorf("the shared heads were listed %d times, want 1", n)
	}
	// After Invalidate, stores reading at once list once between them (the
	// others wait for that LIST), by pages.
	defer state.SetHeadsPage(1)()
	for i := range 4 {
		write(fmt.Sprint("p", i), "inst/z", 1)
	}
	h.Invalidate()
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Go(func() {
			o := state.NewSecrets(c, ns, 3)
			o.ShareHeads(h)
			hs, err := o.HistoriesFor(ctx, "inst/z", nil)
			if err != nil {
				t.Error(err)
			}
			got[i] = strings.Join(slices.Sorted(maps.Keys(hs)), " ")
		})
	}
	wg.Wait()
	for i, g := range got {
		if g != "p0 p1 p2 p3" {
			t.Errorf("reader %d read %q, want p0 p1 p2 p3", i, g)
		}
	}
	if n := h.Lists(); n != 2 {
		t.Errorf("after Invalidate, 8 readers at once listed the heads %d times, want once", n-1)
	}
}
