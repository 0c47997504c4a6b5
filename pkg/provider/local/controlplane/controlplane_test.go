package controlplane_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
)

// TestControlPlane walks one cluster through its life: start, nodes, a
// Deployment that becomes Available and a Job that completes on simulated
// nodes, an API server restart the client recovers from, and a Stop that leaves
// no process behind.
func TestControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	began := time.Now()
	var events []string // "component state", in order (Progress is called from Start's goroutine)
	cp, err := controlplane.Start(ctx, controlplane.Options{
		Logger: testLogger(t),
		// Exercise the override path with a harmless flag.
		APIServerFlags: map[string]string{"event-ttl": "30m"},
		Progress:       func(e controlplane.ComponentEvent) { events = append(events, string(e.Component)+" "+string(e.State)) },
	})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Logf("start-to-ready: %s", time.Since(began).Round(time.Millisecond))
	// etcd and the API server start together (issue 42): the API server's own
	// start overlaps etcd's instead of waiting for it to be ready.
	if apiStart, etcdReady := slices.Index(events, "kube-apiserver starting"), slices.Index(events, "etcd ready"); apiStart < 0 || etcdReady < 0 || apiStart > etcdReady {
		t.Errorf("start events %v: want kube-apiserver starting before etcd ready", events)
	}
	// The scheduler and kwok start while the API server runs its post-start
	// hooks, the controller manager once it is ready; each is reported ready
	// after it.
	apiReady := slices.Index(events, "kube-apiserver ready")
	for _, comp := range []string{"kube-scheduler", "kwok"} {
		if start, ready := slices.Index(events, comp+" starting"), slices.Index(events, comp+" ready"); start < 0 || start > apiReady || ready < apiReady {
			t.Errorf("start events %v: want %s starting before kube-apiserver ready, and ready after it", events, comp)
		}
	}
	if start := slices.Index(events, "kube-controller-manager starting"); start < apiReady {
		t.Errorf("start events %v: want kube-controller-manager starting after kube-apiserver ready", events)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cp.Stop(context.Background())
		}
	})

	client, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cp.KubeconfigPath()); err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}

	nodesBegan := time.Now()
	nodes, err := cp.AddNodes(ctx, 3, controlplane.NodeOptions{Labels: map[string]string{"pool": "workers"}})
	if err != nil {
		t.Fatalf("add nodes: %v", err)
	}
	t.Logf("3 nodes ready in %s: %v", time.Since(nodesBegan).Round(time.Millisecond), nodes)
	more, err := cp.AddNodes(ctx, 1, controlplane.NodeOptions{})
	if err != nil {
		t.Fatalf("add another node: %v", err)
	}
	if more[0] == nodes[0] {
		t.Fatalf("second AddNodes reused name %s", more[0])
	}

	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lifecycle"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("deployment becomes available on simulated nodes", func(t *testing.T) {
		labels := map[string]string{"app": "web"}
		_, err := client.AppsV1().Deployments(ns.Name).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](3),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						NodeSelector: map[string]string{"pool": "workers"},
						Containers:   []corev1.Container{{Name: "web", Image: "registry.invalid/web:1"}},
					},
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, "deployment available", func() error {
			d, err := client.AppsV1().Deployments(ns.Name).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range d.Status.Conditions {
				if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue && d.Status.ReadyReplicas == 3 {
					return nil
				}
			}
			return fmt.Errorf("ready %d/3, conditions %v", d.Status.ReadyReplicas, d.Status.Conditions)
		})
		pods, err := client.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if !strings.HasPrefix(p.Spec.NodeName, controlplane.DefaultNodeNamePrefix) || p.Status.Phase != corev1.PodRunning {
				t.Errorf("pod %s: node %q phase %s, want a kwok node and Running", p.Name, p.Spec.NodeName, p.Status.Phase)
			}
		}
	})

	t.Run("job completes", func(t *testing.T) {
		_, err := client.BatchV1().Jobs(ns.Name).Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "once"},
			Spec: batchv1.JobSpec{
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "once", Image: "registry.invalid/once:1"}},
				}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, "job complete", func() error {
			j, err := client.BatchV1().Jobs(ns.Name).Get(ctx, "once", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("conditions %v", j.Status.Conditions)
		})
	})

	t.Run("kubectl from the bin dir uses the kubeconfig", func(t *testing.T) {
		kubectl := filepath.Join(cp.BinDir(), "kubectl")
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", cp.KubeconfigPath(), "get", "nodes", "-o", "name").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "node/"+nodes[0]) {
			t.Fatalf("kubectl get nodes: %v\n%s", err, out)
		}
		apply := exec.CommandContext(ctx, kubectl, "--kubeconfig", cp.KubeconfigPath(), "apply", "--server-side", "-f", "-")
		apply.Stdin = strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: by-kubectl, namespace: " + ns.Name + "}\ndata: {a: b}\n")
		if out, err := apply.CombinedOutput(); err != nil {
			t.Fatalf("kubectl apply --server-side: %v\n%s", err, out)
		}
		if _, err := client.CoreV1().ConfigMaps(ns.Name).Get(ctx, "by-kubectl", metav1.GetOptions{}); err != nil {
			t.Errorf("configmap applied by kubectl: %v", err)
		}
	})

	t.Run("client recovers from an api server restart", func(t *testing.T) {
		oldPID := cp.ProcessGroups()[controlplane.APIServer]
		restartBegan := time.Now()
		if err := cp.Restart(ctx, controlplane.APIServer); err != nil {
			t.Fatalf("restart: %v", err)
		}
		t.Logf("kube-apiserver restarted and ready in %s", time.Since(restartBegan).Round(time.Millisecond))
		if newPID := cp.ProcessGroups()[controlplane.APIServer]; newPID == oldPID {
			t.Errorf("kube-apiserver pid unchanged (%d) after restart", newPID)
		}
		// The same client, with connections to the old process, must work again.
		waitFor(ctx, t, "client recovered", func() error {
			_, err := client.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "after-restart"},
			}, metav1.CreateOptions{})
			return err
		})
		// Data written before the restart is still there (it lives in etcd).
		if _, err := client.AppsV1().Deployments(ns.Name).Get(ctx, "web", metav1.GetOptions{}); err != nil {
			t.Errorf("deployment after restart: %v", err)
		}
	})

	pgids := cp.ProcessGroups()
	if len(pgids) != 5 {
		t.Errorf("process groups = %v, want 5 components", pgids)
	}
	dataDir := cp.DataDir()
	if err := cp.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stopped = true
	if left := liveProcesses(t, pgids); len(left) > 0 {
		t.Errorf("processes left after Stop: %v", left)
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary data directory %s not removed: %v", dataDir, err)
	}
	if err := cp.Restart(ctx, controlplane.APIServer); !errors.Is(err, controlplane.ErrStopped) {
		t.Errorf("Restart after Stop = %v, want ErrStopped", err)
	}
}

// helperEnv makes the test binary act as a process that starts a control plane
// and then waits to be killed.
const helperEnv = "KUBEPLUG_CONTROLPLANE_TEST_HELPER"

// TestSIGKILLLeavesNothingBehind starts a control plane in a child test process,
// SIGKILLs that process (no cleanup code can run) and checks that the kernel took
// every component with it.
func TestSIGKILLLeavesNothingBehind(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		return // this process is the helper
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	dataDir := t.TempDir()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperStartAndWait$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+dataDir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	pidFile := filepath.Join(dataDir, "pgids")
	var pgids map[controlplane.Component]int
	waitFor(ctx, t, "helper started a control plane", func() error {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return err
		}
		pgids = map[controlplane.Component]int{}
		for _, f := range strings.Fields(string(b)) {
			name, pid, _ := strings.Cut(f, "=")
			n, err := strconv.Atoi(pid)
			if err != nil {
				return err
			}
			pgids[controlplane.Component(name)] = n
		}
		return nil
	})
	if len(pgids) != 5 {
		t.Fatalf("helper reported %v, want 5 components; output:\n%s", pgids, out.String())
	}
	if left := liveProcesses(t, pgids); len(left) != 5 {
		t.Fatalf("before kill: live components %v, want all 5", left)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitFor(ctx, t, "components gone after SIGKILL of their parent", func() error {
		if left := liveProcesses(t, pgids); len(left) > 0 {
			return fmt.Errorf("still alive: %v", left)
		}
		return nil
	})
}

// TestHelperStartAndWait is the child of TestSIGKILLLeavesNothingBehind.
func TestHelperStartAndWait(t *testing.T) {
	dataDir := os.Getenv(helperEnv)
	if dataDir == "" {
		// Not a skip: this is not a check, only the body of the helper process.
		return
	}
	cp, err := controlplane.Start(t.Context(), controlplane.Options{Logger: testLogger(t), DataDir: filepath.Join(dataDir, "cluster")})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for c, pid := range cp.ProcessGroups() {
		fmt.Fprintf(&b, "%s=%d\n", c, pid)
	}
	tmp := filepath.Join(dataDir, "pgids.tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dataDir, "pgids")); err != nil {
		t.Fatal(err)
	}
	<-t.Context().Done() // until killed
}

func TestMissingBinariesFail(t *testing.T) {
	t.Setenv(controlplane.BinDirEnv, t.TempDir())
	_, err := controlplane.Start(t.Context(), controlplane.Options{})
	if !errors.Is(err, controlplane.ErrBinariesNotFound) {
		t.Fatalf("Start with empty bin dir = %v, want ErrBinariesNotFound", err)
	}
	if !strings.Contains(err.Error(), "make localcluster") {
		t.Errorf("error %q does not tell the user to run make localcluster", err)
	}
}

// BenchmarkStart measures start-to-ready (and stop) of a whole control plane.
func BenchmarkStart(b *testing.B) {
	ctx := b.Context()
	for b.Loop() {
		cp, err := controlplane.Start(ctx, controlplane.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := cp.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// liveProcesses scans /proc for processes, other than zombies, whose process
// group is one of pgids. It returns "pid(pgid)" strings.
func liveProcesses(t *testing.T, pgids map[controlplane.Component]int) []string {
	t.Helper()
	want := map[int]controlplane.Component{}
	for c, g := range pgids {
		want[g] = c
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("scan /proc: %v", err)
	}
	var live []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited while scanning
		}
		// Fields after the parenthesised command: state ppid pgrp ...
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 3 || fields[0] == "Z" || fields[0] == "X" {
			continue
		}
		pgrp, err := strconv.Atoi(fields[2])
		if err != nil {
			continue
		}
		if c, ok := want[pgrp]; ok {
			live = append(live, fmt.Sprintf("%s:%d(pgid %d)", c, pid, pgrp))
		}
	}
	return live
}

func waitFor(ctx context.Context, t *testing.T, what string, cond func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	for {
		if last = cond(); last == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s: %v", what, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
