package nodeagent_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/nodeagent"
)

// TestBoot checks the boot's order against the behaviours with a nodeup command
// that records when it ran; test/e2e/boot runs the same through the rendered files.
func TestBoot(t *testing.T) {
	nodeup := []string{"sh", "-c", "date +%s.%N > nodeup"}
	t.Run("async hooks do not hold the kubelet", func(t *testing.T) {
		root := machine(t,
			hook{name: "slow", behavior: hookspec.BehaviorAsyncBypass, command: []string{"sh", "-c", "sleep 2; touch slow"}},
			hook{name: "fast", behavior: hookspec.BehaviorSyncEnforce, command: []string{"true"}},
			hook{name: "after", at: hookspec.PhaseAfterNodeup, behavior: hookspec.BehaviorSyncEnforce, command: []string{"test", "-e", "nodeup"}},
		)
		start := time.Now()
		res, err := nodeagent.Boot(t.Context(), nodeagent.BootOptions{Agent: nodeagent.Options{Root: root, Node: hookspec.Node{Name: "n"}}, Nodeup: nodeup})
		if err != nil {
			t.Fatal(err)
		}
		if res.NodeupStarted == nil || res.NodeupStarted.Sub(start) > time.Second {
			t.Errorf("nodeup started at %v, %v after the boot began; the async hook takes 2s", res.NodeupStarted, res.NodeupStarted.Sub(start))
		}
		if took := time.Since(start); took < 2*time.Second {
			t.Errorf("Boot returned after %s, before its async hook ended", took)
		}
		if _, err := os.Stat(filepath.Join(root, "slow")); err != nil {
			t.Errorf("the async hook did not finish: %v", err)
		}
		if len(res.Reports) != 2 || res.Reports[1].Phase != hookspec.PhaseAfterNodeup || res.Reports[1].Failed {
			t.Errorf("reports: %+v", res.Reports)
		}
	})
	t.Run("an enforced failure keeps the kubelet down", func(t *testing.T) {
		root := machine(t,
			hook{name: "install", behavior: hookspec.BehaviorSyncEnforce, command: []string{"sh", "-c", "exit 3"}},
			hook{name: "after", at: hookspec.PhaseAfterNodeup, behavior: hookspec.BehaviorSyncBypass, command: []string{"touch", "after"}},
		)
		// A marker from an earlier boot is cleared first.
		writeFile(t, filepath.Join(root, hookspec.FailedMarkerPath), "old\n")
		res, err := nodeagent.Boot(t.Context(), nodeagent.BootOptions{Agent: nodeagent.Options{Root: root, Node: hookspec.Node{Name: "n"}}, Nodeup: nodeup})
		var he *nodeagent.HookError
		if !errors.As(err, &he) || he.Hook != "install" {
			t.Fatalf("Boot: %v, want the hook's *HookError", err)
		}
		if res.NodeupStarted != nil {
			t.Error("nodeup ran after an enforced failure")
		}
		for _, p := range []string{"nodeup", "after"} {
			if _, err := os.Stat(filepath.Join(root, p)); err == nil {
				t.Errorf("%s exists: it ran after the enforced failure", p)
			}
		}
		b, err := os.ReadFile(filepath.Join(root, hookspec.FailedMarkerPath))
		if err != nil || strings.Contains(string(b), "old") || !strings.Contains(string(b), "hook install of plugin p failed in phase beforeNodeup on node n: exit status 3") {
			t.Errorf("marker: %q, %v", b, err)
		}
	})
	t.Run("a failed nodeup fails the node", func(t *testing.T) {
		root := machine(t)
		_, err := nodeagent.Boot(t.Context(), nodeagent.BootOptions{Agent: nodeagent.Options{Root: root}, Nodeup: []string{"sh", "-c", "echo no kubelet >&2; exit 1"}})
		if err == nil || !strings.Contains(err.Error(), "no kubelet") {
			t.Fatalf("Boot: %v, want the nodeup's failure with its output", err)
		}
		if _, err := os.Stat(filepath.Join(root, hookspec.FailedMarkerPath)); err != nil {
			t.Errorf("no marker: %v", err)
		}
	})
}
