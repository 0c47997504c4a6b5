package action_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/lease"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// writeFiles writes files (path → content) under a new directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestApplyLease checks the operation lease through the Apply and Uninstall
// actions: a run finds the lease held and fails naming the holder, and a run that
// fails half-way releases it.
func TestApplyLease(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"cluster.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: lease}
spec:
  kubernetesVersion: 1.37.1
  provider: {local: {}}
  plugins:
    sources: [{dir: ./plugins}]
    enabled: [{name: broken}]
`,
		"plugins/broken/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: broken, version: 0.1.0}
spec:
  contributes:
    kubernetes: {manifests: [manifests/]}
`,
		// The API server rejects a ConfigMap named so: the apply fails in its wave.
		"plugins/broken/manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Not_A_Name, namespace: default}\n",
	})
	cfg := &action.Config{NoBuiltin: true, Env: func(string) (string, bool) { return "", false }}
	rc := testcluster.RESTConfig(t)
	leases := testcluster.Client(t).CoordinationV1().Leases("kubeplug-system")
	holder := func() string {
		l, err := leases.Get(t.Context(), lease.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}

	other, err := deploy.New(rc, deploy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, release, err := lease.Lock(t.Context(), other.Client(), lease.Options{Operation: "rollback", Identity: "elsewhere/42/abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	apply := action.NewApply(cfg)
	apply.Target.RESTConfig = rc
	_, l := apply.Run(t.Context(), load(t, filepath.Join(dir, "cluster.yaml")))
	if !l.HasFatal() || !strings.Contains(l.String(), "another kubeplug operation holds the cluster's lease: rollback by elsewhere/42 since ") {
		t.Errorf("apply while the lease is held: %v", l)
	}
	un := action.NewUninstall(cfg)
	un.Target.RESTConfig = rc
	if _, l := un.Run(t.Context(), "broken"); !l.HasFatal() || !strings.Contains(l.String(), "rollback by elsewhere/42") {
		t.Errorf("uninstall while the lease is held: %v", l)
	}
	// A dry run takes no lease, so it runs.
	dry := action.NewApply(cfg)
	dry.Target.RESTConfig, dry.DryRun = rc, true
	if _, l := dry.Run(t.Context(), load(t, filepath.Join(dir, "cluster.yaml"))); strings.Contains(l.String(), "holds the cluster's lease") {
		t.Errorf("dry run: %v", l)
	}
	if err := release(t.Context()); err != nil {
		t.Fatal(err)
	}

	_, l = apply.Run(t.Context(), load(t, filepath.Join(dir, "cluster.yaml")))
	if !l.HasFatal() || !strings.Contains(l.String(), "Not_A_Name") {
		t.Fatalf("apply of an invalid object: %v", l)
	}
	if h := holder(); h != "" {
		t.Errorf("the lease is held by %q after a failed apply", h)
	}
	if _, l := un.Run(t.Context(), "broken"); l.HasFatal() {
		t.Fatalf("uninstall: %v", l)
	}
	if h := holder(); h != "" {
		t.Errorf("the lease is held by %q after uninstall", h)
	}
}

// TestApplyWaitsForTheLease: an apply that finds the lease held by another run
// waits for it, telling LeaseWaiting events that name the holder (and no log
// warning), then LeaseTaken once the other run releases it.
func TestApplyWaitsForTheLease(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"cluster.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: leasewait}
spec:
  kubernetesVersion: 1.37.1
  provider: {local: {}}
  plugins:
    sources: [{dir: ./plugins}]
    enabled: [{name: waiter}]
`,
		"plugins/waiter/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: waiter, version: 0.1.0}
spec:
  contributes:
    kubernetes: {manifests: [manifests/]}
`,
		"plugins/waiter/manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leasewait, namespace: default}\n",
	})
	var logs strings.Builder
	cfg := &action.Config{NoBuiltin: true, Env: func(string) (string, bool) { return "", false },
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	rc := testcluster.RESTConfig(t)
	other, err := deploy.New(rc, deploy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, release, err := lease.Lock(t.Context(), other.Client(), lease.Options{Operation: "rollback", Identity: "elsewhere/42/abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []deploy.Event
	released := make(chan error, 1)
	apply := action.NewApply(cfg)
	apply.Target.RESTConfig = rc
	apply.Lease.Wait = time.Minute
	apply.Events = func(e deploy.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
		if e.Type == deploy.LeaseWaiting {
			go func() { time.Sleep(time.Second); released <- release(context.Background()) }()
		}
	}
	t.Cleanup(func() {
		un := action.NewUninstall(cfg)
		un.Target.RESTConfig = rc
		un.Run(context.WithoutCancel(t.Context()), "waiter")
	})
	if _, l := apply.Run(t.Context(), load(t, filepath.Join(dir, "cluster.yaml"))); l.HasFatal() {
		t.Fatalf("apply after waiting for the lease: %v", l)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var types []string
	for _, e := range events {
		types = append(types, string(e.Type))
	}
	if len(events) < 3 || events[0].Type != deploy.LeaseWaiting || events[1].Type != deploy.LeaseTaken {
		t.Fatalf("events %v, want LeaseWaiting, LeaseTaken and the wave's", types)
	}
	w := events[0]
	if w.Holder != "elsewhere/42" || w.Operation != "rollback" || time.Until(w.Expires) <= 0 || time.Until(w.Expires) > 31*time.Second {
		t.Errorf("LeaseWaiting %+v, want rollback by elsewhere/42 expiring within 30s", w)
	}
	if strings.Contains(logs.String(), "waiting for the cluster's operation lease") {
		t.Errorf("the wait logged as well as told:\n%s", logs.String())
	}
}
