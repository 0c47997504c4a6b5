package action_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// scheduleCluster writes four plugins in two waves: gate and fast in wave 0,
// gatedep (requiring gate) and fastdep (requiring fast) in wave 1. gate's one
// ConfigMap is ready only once it has the key "open", which the test sets.
func scheduleCluster(t *testing.T, dir, ns string) string {
	t.Helper()
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: " + ns + "}\ndata: {plugin: " + name + "}\n"
	}
	plugin := func(name, requires, extra string) string {
		return "apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: " + name + ", version: 1.0.0}\nspec:\n" +
			"  requires: [" + requires + "]\n  contributes: {kubernetes: {manifests: [cm.yaml]}}\n" + extra
	}
	files := map[string]string{
		"cluster.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: schedule}
spec:
  kubernetesVersion: 1.37.1
  plugins:
    sources: [{dir: ./plugins}]
    enabled: [{name: sched-gate}, {name: sched-fast}, {name: sched-gatedep}, {name: sched-fastdep}]
`,
		"plugins/gate/plugin.yaml":    plugin("sched-gate", "", "  health: [{kind: ConfigMap, expression: 'has(object.data.open)'}]\n"),
		"plugins/gate/cm.yaml":        cm("gate"),
		"plugins/fast/plugin.yaml":    plugin("sched-fast", "", ""),
		"plugins/fast/cm.yaml":        cm("fast"),
		"plugins/gatedep/plugin.yaml": plugin("sched-gatedep", "{name: sched-gate}", ""),
		"plugins/gatedep/cm.yaml":     cm("gatedep"),
		"plugins/fastdep/plugin.yaml": plugin("sched-fastdep", "{name: sched-fast}", ""),
		"plugins/fastdep/cm.yaml":     cm("fastdep"),
	}
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "cluster.yaml")
}

// TestDependentsStartWhenTheirRequirementsAreReady: a plugin starts as soon as
// the plugins it requires are ready, not when its whole previous wave is. While
// gate (wave 0) is held unready, fastdep (wave 1, requiring only fast) is
// applied and ready, and gatedep, which requires gate, has not one object in the
// cluster; once gate is ready, gatedep follows. By the events, no plugin was
// applied before every plugin it requires was ready, and each wave started and
// finished once.
func TestDependentsStartWhenTheirRequirementsAreReady(t *testing.T) {
	ns := testcluster.Namespace(t)
	cs := testcluster.Client(t)
	apply := action.NewApply(&action.Config{NoBuiltin: true, Env: func(string) (string, bool) { return "", false }})
	apply.Target.RESTConfig = testcluster.RESTConfig(t)
	apply.Timeout = 2 * time.Minute
	var mu sync.Mutex
	var events []deploy.Event
	apply.Events = func(e deploy.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	seen := func(typ deploy.EventType, plugin string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(events, func(e deploy.Event) bool { return e.Type == typ && e.Plugin == plugin })
	}
	cl := load(t, scheduleCluster(t, t.TempDir(), ns))
	done := make(chan diag.List, 1)
	go func() {
		_, l := apply.Run(t.Context(), cl)
		done <- l
	}()

	deadline := time.Now().Add(time.Minute)
	for !seen(deploy.PluginReady, "sched-fastdep") {
		select {
		case l := <-done:
			t.Fatalf("apply ended before fastdep was ready, with gate held unready: %v", l)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("fastdep never became ready while gate was held unready: it waited for its whole wave")
		}
	}
	if seen(deploy.PluginReady, "sched-gate") {
		t.Fatal("gate is ready, though nothing opened it")
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "gatedep", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("gatedep's ConfigMap, before gate is ready: err = %v, want NotFound", err)
	}
	if seen(deploy.PluginApplied, "sched-gatedep") {
		t.Error("gatedep was applied before gate was ready")
	}

	if _, err := cs.CoreV1().ConfigMaps(ns).Patch(t.Context(), "gate", types.MergePatchType, []byte(`{"data":{"open":"yes"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-done:
		if l.HasFatal() {
			t.Fatal(l)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("apply did not finish once gate was open")
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "gatedep", metav1.GetOptions{}); err != nil {
		t.Errorf("gatedep's ConfigMap after the apply: %v", err)
	}

	requires := map[string]string{"sched-gatedep": "sched-gate", "sched-fastdep": "sched-fast"}
	ready := map[string]bool{}
	var started, finished []int
	mu.Lock()
	defer mu.Unlock()
	for _, e := range events {
		switch e.Type {
		case deploy.PluginReady:
			ready[e.Plugin] = true
		case deploy.PluginApplied:
			if req, ok := requires[e.Plugin]; ok && !ready[req] {
				t.Errorf("%s was applied before %s, which it requires, was ready", e.Plugin, req)
			}
		case deploy.WaveStarted:
			started = append(started, e.Wave)
		case deploy.WaveFinished:
			finished = append(finished, e.Wave)
		}
	}
	slices.Sort(finished)
	if !slices.Equal(started, []int{0, 1}) || !slices.Equal(finished, []int{0, 1}) {
		t.Errorf("waves started %v and finished %v, want each of 0 and 1 once", started, finished)
	}
	if len(ready) != 4 {
		t.Errorf("plugins ready: %v, want all four", ready)
	}
}

// abandonCluster writes base, whose ConfigMap is ready only with the key "open"
// (which version 1 has and version 2 drops), dep requiring base, and, in version
// 2, newdep requiring base too.
func abandonCluster(t *testing.T, dir, ns string, version int) string {
	t.Helper()
	v := strconv.Itoa(version)
	open := ""
	if version == 1 {
		open = ", open: 'yes'"
	}
	enabled := "[{name: sched-base}, {name: sched-dep}]"
	files := map[string]string{
		"plugins/base/plugin.yaml": "apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: sched-base, version: " + v + ".0.0}\nspec:\n" +
			"  contributes: {kubernetes: {manifests: [cm.yaml]}}\n  health: [{kind: ConfigMap, expression: 'has(object.data.open)'}]\n",
		"plugins/base/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: base, namespace: " + ns + "}\ndata: {v: '" + v + "'" + open + "}\n",
		"plugins/dep/plugin.yaml": "apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: sched-dep, version: " + v + ".0.0}\nspec:\n" +
			"  requires: [{name: sched-base}]\n  contributes: {kubernetes: {manifests: [cm.yaml]}}\n",
		"plugins/dep/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dep, namespace: " + ns + "}\ndata: {v: '" + v + "'}\n",
	}
	if version == 2 {
		enabled = "[{name: sched-base}, {name: sched-dep}, {name: sched-newdep}]"
		files["plugins/newdep/plugin.yaml"] = "apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: sched-newdep, version: 1.0.0}\nspec:\n" +
			"  requires: [{name: sched-base}]\n  contributes: {kubernetes: {manifests: [cm.yaml]}}\n"
		files["plugins/newdep/cm.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: newdep, namespace: " + ns + "}\ndata: {v: '1'}\n"
	}
	files["cluster.yaml"] = "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: abandon}\nspec:\n  kubernetesVersion: 1.37.1\n" +
		"  plugins:\n    sources: [{dir: ./plugins}]\n    enabled: " + enabled + "\n"
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "cluster.yaml")
}

// TestFailureAbandonsBegunDependents: a plugin's revision is recorded ahead of
// its turn, while what it waits for applies. When that fails, the dependents
// are never applied, and their records say so: an upgraded plugin's new
// revision is Interrupted ("not applied"), which the next run continues; a
// plugin that was not installed has no record at all.
func TestFailureAbandonsBegunDependents(t *testing.T) {
	ns := testcluster.Namespace(t)
	cfg := &action.Config{NoBuiltin: true, Env: func(string) (string, bool) { return "", false }}
	apply := action.NewApply(cfg)
	apply.Target.RESTConfig = testcluster.RESTConfig(t)
	apply.Timeout = time.Minute
	dir := t.TempDir()
	if _, l := apply.Run(t.Context(), load(t, abandonCluster(t, dir, ns, 1))); l.HasFatal() {
		t.Fatalf("version 1: %v", l)
	}
	apply.Timeout = 3 * time.Second
	if _, l := apply.Run(t.Context(), load(t, abandonCluster(t, dir, ns, 2))); !l.HasFatal() {
		t.Fatal("version 2 applied, though base never becomes ready")
	}
	hist := action.NewHistory(cfg)
	hist.Target.RESTConfig = apply.Target.RESTConfig
	revs, l := hist.Run(t.Context(), "sched-dep")
	if l.HasFatal() {
		t.Fatal(l)
	}
	if len(revs) != 2 || revs[1].Status != deploy.PhaseInterrupted || !strings.Contains(revs[1].Message, "not applied") {
		t.Errorf("dep's history = %+v, want its revision 2 Interrupted, not applied", revs)
	}
	if revs, _ := hist.Run(t.Context(), "sched-newdep"); len(revs) != 0 {
		t.Errorf("newdep, never applied, has revisions: %+v", revs)
	}
	cs := testcluster.Client(t)
	if cm, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "dep", metav1.GetOptions{}); err != nil || cm.Data["v"] != "1" {
		t.Errorf("dep's ConfigMap = %v, %v; want version 1's, untouched", cm.Data, err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "newdep", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("newdep's ConfigMap: err = %v, want NotFound", err)
	}
}
