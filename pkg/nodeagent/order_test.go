package nodeagent_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/nodeagent"
)

// manifest writes hooks as the root's hooks manifest; each hook's Command defaults
// to a shell line appending its ID to the file "ran".
func manifest(t testing.TB, root string, hooks ...hookspec.Hook) {
	t.Helper()
	for i := range hooks {
		h := &hooks[i]
		if h.At == "" {
			h.At = hookspec.PhaseBeforeNodeup
		}
		if h.Plugin == "" {
			h.Plugin = "p"
		}
		if h.Command == nil && h.URL == "" {
			h.Command = []string{"/bin/sh", "-c", "echo " + h.ID() + " >> ran"}
		}
	}
	b, err := json.Marshal(hookspec.Manifest{Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, hookspec.HooksManifestPath), string(b))
}

func ran(t testing.TB, root string) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(root, "ran"))
	return strings.Join(strings.Fields(string(b)), " ")
}

func TestOrder(t *testing.T) {
	fail := []string{"/bin/sh", "-c", "echo p/$KUBEPLUG_HOOK >> ran; exit 1"}
	tests := []struct {
		name      string
		hooks     []hookspec.Hook
		ran, want string
	}{{
		name:  "file order without constraints",
		hooks: []hookspec.Hook{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		ran:   "p/a p/b p/c", want: "a=succeeded b=succeeded c=succeeded",
	}, {
		name:  "requires moves the dependent after, ties keep file order",
		hooks: []hookspec.Hook{{Name: "a", Requires: []string{"c"}}, {Name: "b"}, {Name: "c"}},
		ran:   "p/b p/c p/a", want: "b=succeeded c=succeeded a=succeeded",
	}, {
		name:  "before, bare and qualified, across plugins",
		hooks: []hookspec.Hook{{Name: "a"}, {Plugin: "q", Name: "b", Before: []string{"p/a"}}, {Name: "c", Before: []string{"d", "q/b"}}, {Name: "d"}},
		ran:   "p/c q/b p/a p/d", want: "c=succeeded b=succeeded a=succeeded d=succeeded",
	}, {
		name:  "before naming a hook not on the machine only orders",
		hooks: []hookspec.Hook{{Name: "a", Before: []string{"x/y"}}},
		ran:   "p/a", want: "a=succeeded",
	}, {
		name: "requires on a failed hook is not run, others go on",
		hooks: []hookspec.Hook{
			{Name: "a", Requires: []string{"b"}}, {Name: "b", Behavior: hookspec.BehaviorSyncBypass, Command: fail},
			{Name: "c", Requires: []string{"a"}}, {Name: "d"},
		},
		ran: "p/b p/d", want: "b=failed a=not-run c=not-run d=succeeded",
	}, {
		name:  "requires on a skipped hook is not run",
		hooks: []hookspec.Hook{{Name: "a", When: "false"}, {Name: "b", Requires: []string{"a"}}},
		ran:   "", want: "a=skipped b=not-run",
	}, {
		name:  "requires on a hook not on the machine is not run",
		hooks: []hookspec.Hook{{Name: "a", Requires: []string{"q/x"}}},
		ran:   "", want: "a=not-run",
	}, {
		name: "a dependent waits for its async requirement",
		hooks: []hookspec.Hook{
			{Name: "a", Behavior: hookspec.BehaviorAsyncEnforce, Command: []string{"/bin/sh", "-c", "sleep 0.3; echo p/a >> ran"}},
			{Name: "b", Requires: []string{"a"}},
		},
		ran: "p/a p/b", want: "a=succeeded b=succeeded",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			manifest(t, root, tt.hooks...)
			rep, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
			if err != nil {
				t.Fatal(err)
			}
			if got := statuses(rep); got != tt.want {
				t.Errorf("statuses %s, expected %s", got, tt.want)
			}
			if got := ran(t, root); got != tt.ran {
				t.Errorf("ran %q, expected %q", got, tt.ran)
			}
		})
	}
}

func TestOrderNotRunReason(t *testing.T) {
	root := t.TempDir()
	manifest(t, root, hookspec.Hook{Name: "a", When: "false"}, hookspec.Hook{Name: "b", Requires: []string{"a"}})
	rep, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rep.Hooks[1].Reason, "requires p/a, which was skipped"; got != want {
		t.Errorf("reason %q, expected %q", got, want)
	}
}

func TestOrderCycle(t *testing.T) {
	tests := []struct {
		name  string
		hooks []hookspec.Hook
		chain string
	}{
		{name: "requires", hooks: []hookspec.Hook{{Name: "a", Requires: []string{"b"}}, {Name: "b", Requires: []string{"a"}}}, chain: "p/a -> p/b -> p/a"},
		{name: "before and requires", hooks: []hookspec.Hook{{Name: "x"}, {Name: "a", Requires: []string{"b"}, Before: []string{"c"}}, {Name: "b", Requires: []string{"c"}}, {Name: "c"}}, chain: "p/a -> p/b -> p/c -> p/a"},
		{name: "itself", hooks: []hookspec.Hook{{Name: "a", Requires: []string{"p/a"}}}, chain: "p/a -> p/a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			manifest(t, root, tt.hooks...)
			_, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
			var ce *hookspec.CycleError
			var me *hookspec.ManifestError
			if !errors.As(err, &ce) || !errors.As(err, &me) {
				t.Fatalf("error %v, expected a *CycleError in a *ManifestError", err)
			}
			if got := strings.Join(ce.Chain, " -> "); got != tt.chain || !strings.Contains(err.Error(), tt.chain) {
				t.Errorf("error %q, expected the chain %s", err, tt.chain)
			}
			if got := ran(t, root); got != "" {
				t.Errorf("ran %q despite the cycle", got)
			}
		})
	}
}

func TestOrderAcrossPhasesIsAnError(t *testing.T) {
	root := t.TempDir()
	manifest(t, root, hookspec.Hook{Name: "a", Requires: []string{"b"}}, hookspec.Hook{Name: "b", At: hookspec.PhaseAfterNodeup})
	_, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
	if err == nil || !strings.Contains(err.Error(), "hook p/a requires p/b, which runs in phase afterNodeup") {
		t.Fatalf("error %v", err)
	}
}

func TestOnce(t *testing.T) {
	root := t.TempDir()
	format := func(script string) {
		manifest(t, root,
			hookspec.Hook{Name: "format", Once: true, Command: []string{"/bin/sh", "-c", script}},
			hookspec.Hook{Name: "mount", Requires: []string{"format"}},
		)
	}
	run := func(force bool) string {
		t.Helper()
		rep, err := newAgent(t, nodeagent.Options{Root: root, Force: force}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
		if err != nil {
			t.Fatal(err)
		}
		return statuses(rep)
	}
	format("echo p/format >> ran")
	if got := run(false); got != "format=succeeded mount=succeeded" {
		t.Fatalf("first run: %s", got)
	}
	format("echo p/format-changed >> ran")
	if got := run(false); got != "format=skipped mount=skipped" {
		t.Errorf("changed script: %s", got)
	}
	if got := run(true); got != "format=skipped mount=succeeded" {
		t.Errorf("force: %s", got)
	}
	if got, want := ran(t, root), "p/format p/mount p/mount"; got != want {
		t.Errorf("ran %q, expected %q", got, want)
	}
}

func TestOnceFailureRunsAgain(t *testing.T) {
	root := t.TempDir()
	manifest(t, root, hookspec.Hook{Name: "format", Once: true, Behavior: hookspec.BehaviorSyncBypass, Command: []string{"/bin/sh", "-c", "echo p/format >> ran; [ -f fixed ]"}})
	for i, want := range []string{"format=failed", "format=succeeded", "format=skipped"} {
		if i == 1 {
			writeFile(t, filepath.Join(root, "fixed"), "")
		}
		rep, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
		if err != nil {
			t.Fatal(err)
		}
		if got := statuses(rep); got != want {
			t.Errorf("run %d: %s, expected %s", i+1, got, want)
		}
	}
}

func TestManifestOption(t *testing.T) {
	root, other := t.TempDir(), t.TempDir()
	manifest(t, other, hookspec.Hook{Name: "from-config"})
	manifest(t, root, hookspec.Hook{Name: "from-root"})
	_, err := newAgent(t, nodeagent.Options{Root: root, Manifest: filepath.Join(other, hookspec.HooksManifestPath)}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
	if err != nil {
		t.Fatal(err)
	}
	if got := ran(t, root); got != "p/from-config" {
		t.Errorf("ran %q, expected the hook of the given manifest", got)
	}
}
