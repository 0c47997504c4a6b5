package action_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Run(m)) }

// TestApplyQuickstartThenRemoveAPlugin applies the quickstart to the local control
// plane, checks every plugin is installed and ready, then drops a plugin from the
// cluster file and applies again: it is uninstalled, the rest untouched.
func TestApplyQuickstartThenRemoveAPlugin(t *testing.T) {
	cfg := &action.Config{Env: func(string) (string, bool) { return "", false }}
	var events []deploy.Event
	apply := action.NewApply(cfg)
	apply.Target.RESTConfig = testcluster.RESTConfig(t)
	apply.Timeout = 2 * time.Minute
	apply.Events = func(e deploy.Event) { events = append(events, e) }
	res, l := apply.Run(t.Context(), load(t, "../../examples/quickstart/cluster.yaml"))
	if l.HasFatal() {
		t.Fatal(l)
	}
	if !res.Validated || res.Applied == 0 {
		t.Errorf("result = %+v", res)
	}
	// Waves: hello and metrics-server both wait for control-plane's wave.
	var waves []int
	for _, e := range events {
		if e.Type == deploy.WaveStarted {
			waves = append(waves, e.Wave)
		}
	}
	if !slices.Equal(waves, []int{0, 1}) {
		t.Errorf("waves started = %v, want [0 1]", waves)
	}
	status := action.NewStatus(cfg)
	status.Target.RESTConfig = apply.Target.RESTConfig
	st, l := status.Run(t.Context())
	if l.HasFatal() {
		t.Fatal(l)
	}
	got := map[string]deploy.PluginStatus{}
	for _, s := range st {
		got[s.Plugin] = s
	}
	for _, p := range []string{"control-plane", "hello", "metrics-server"} {
		s, ok := got[p]
		if !ok || s.Phase != deploy.PhaseReady || s.Ready != s.Objects {
			t.Errorf("status of %s = %+v", p, s)
		}
	}
	core := testcluster.Client(t)
	dep, err := core.AppsV1().Deployments("hello").Get(t.Context(), "hello", metav1.GetOptions{})
	if err != nil || dep.Status.AvailableReplicas != 2 {
		t.Fatalf("hello Deployment: %v, available %d", err, dep.Status.AvailableReplicas)
	}

	// Drop hello from the cluster file and apply again.
	text, err := os.ReadFile("../../examples/quickstart/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	trimmed := strings.Replace(string(text), "      - name: hello\n", "      - name: hello-gone\n", 1)
	trimmed = strings.Replace(trimmed, "- dir: ./plugins", "- dir: "+filepath.Join(mustAbs(t, "../../examples/quickstart"), "plugins"), 1)
	trimmed = removeEnabled(trimmed, "hello-gone")
	path := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(path, []byte(trimmed), 0o644); err != nil {
		t.Fatal(err)
	}
	res, l = apply.Run(t.Context(), load(t, path))
	if l.HasFatal() {
		t.Fatal(l)
	}
	if !slices.Equal(res.Removed, []string{"hello"}) {
		t.Errorf("removed = %v, want [hello]", res.Removed)
	}
	if _, err := core.AppsV1().Deployments("hello").Get(t.Context(), "hello", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("hello Deployment after its plugin was removed: %v", err)
	}
	// A re-apply with nothing changed converges without touching anything.
	res, l = apply.Run(context.WithoutCancel(t.Context()), load(t, path))
	if l.HasFatal() || len(res.Removed) != 0 || res.Pruned != 0 {
		t.Errorf("re-apply: %+v %v", res, l)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// removeEnabled drops one entry (and its indented lines) from spec.plugins.enabled.
func removeEnabled(text, name string) string {
	lines := strings.Split(text, "\n")
	var out []string
	skip := false
	for _, l := range lines {
		if strings.HasPrefix(l, "      - name: "+name) {
			skip = true
			continue
		}
		if skip && strings.HasPrefix(l, "        ") {
			continue
		}
		skip = false
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
