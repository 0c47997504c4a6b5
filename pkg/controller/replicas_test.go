package controller_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplug/kubeplug/internal/faultpoint"
	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/controller"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// childEnv makes the test binary run a controller replica (runChild) instead
// of the tests: the kill -9 and leader election tests need real processes.
const childEnv = "KUBEPLUG_CONTROLLER_TEST_CHILD"

// runChild is one controller replica with leader election, against the
// kubeconfig in $KUBECONFIG, until SIGTERM.
func runChild() int {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts := controller.Options{
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Action:         &action.Config{NoBuiltin: true},
		LeaderElection: true, LeaderLease: 6 * time.Second,
		MetricsAddr: "0", ProbeAddr: "0", WorkDir: os.Getenv(childEnv), LeaseIdle: 200 * time.Millisecond,
	}
	if n, err := strconv.Atoi(os.Getenv(shardsEnv)); err == nil {
		opts.LeaderElection, opts.Shards, opts.ReplicaID = false, n, os.Getenv(replicaEnv)
	}
	if os.Getenv(benchChild) != "" {
		opts.LeaderElection = false // at the default concurrency
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		if v, err := strconv.Atoi(os.Getenv("KUBEPLUG_BENCH_CONCURRENCY")); err == nil {
			opts.Concurrency = v
		}
		if dir := os.Getenv(benchProfile); dir != "" {
			defer profile(dir)()
		}
	}
	c, err := controller.New(cfg, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-c.Elected()
		fmt.Fprintln(os.Stderr, "ELECTED", os.Getpid())
	}()
	if err := c.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type replica struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process ended, with err set
	err  error
}

// startReplica runs a controller replica process; faultPoint, when set, kills
// it there (internal/faultpoint).
func startReplica(t *testing.T, name, faultPoint string, env ...string) *replica {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, name+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+filepath.Join(dir, "work"), "KUBECONFIG="+testcluster.ControlPlane(t).KubeconfigPath())
	if faultPoint != "" {
		cmd.Env = append(cmd.Env, faultpoint.EnvVar+"="+faultPoint)
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{cmd: cmd, log: log, done: make(chan struct{})}
	go func() { r.err = cmd.Wait(); f.Close(); close(r.done) }()
	t.Cleanup(func() {
		if t.Failed() {
			_ = cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, into its log
			select {
			case <-r.done:
			case <-time.After(5 * time.Second):
			}
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(45 * time.Second):
			_ = cmd.Process.Kill()
			<-r.done
			t.Errorf("replica %s did not stop on SIGTERM", name)
		}
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("replica %s:\n%s", name, b)
		}
	})
	return r
}

func (r *replica) elected() bool {
	b, _ := os.ReadFile(r.log)
	return strings.Contains(string(b), "ELECTED")
}

// TestReplicasKillNine: a replica killed with SIGKILL in the middle of an
// apply (after its release record's objects were written, before the record)
// leaves the installation to the next leader, which converges it; of two
// replicas one leads, and when it is killed the other takes over.
func TestReplicasKillNine(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt, apps = "ctrl-replicas", "ctrl-replicas-apps"
	namespace(t, cs, mgmt)
	namespace(t, cs, "kubeplug-system")
	catalogConfigMap(t, cs, mgmt, "packages", catalogPackages(t, apps, "rep-"))
	create(t, dc, catGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: main}, spec: {sources: [{configMap: packages}]}}`)
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		for _, name := range []string{"first", "second"} {
			_ = dc.Resource(instGVR).Namespace(mgmt).Delete(ctx, name, metav1.DeleteOptions{})
		}
	})

	killed := startReplica(t, "killed", "state:chunks-written")
	create(t, dc, instGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: first}, spec: {catalogs: [main], plugins: [{name: rep-app, values: {message: first}}]}}`)
	select {
	case <-killed.done:
		err := killed.err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			b, _ := os.ReadFile(killed.log)
			t.Fatalf("the replica ended with %v, want killed by SIGKILL at the fault point:\n%s", err, b)
		}
	case <-time.After(time.Minute):
		t.Fatal("the replica was not killed at its fault point")
	}

	a, b := startReplica(t, "a", ""), startReplica(t, "b", "")
	readyAt(t, dc, instGVR, mgmt, "first", 2*time.Minute)
	if data, err := message(t, cs, apps); err != nil || data["message"] != "first" {
		t.Fatalf("after the new leader converged, app-settings = %v, %v", data, err)
	}
	if a.elected() == b.elected() {
		t.Fatalf("leaders: a %t, b %t; want exactly one", a.elected(), b.elected())
	}
	leader, follower := a, b
	if b.elected() {
		leader, follower = b, a
	}
	if err := leader.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-leader.done
	edit(t, dc, instGVR, mgmt, "first", func(spec map[string]any) {
		spec["plugins"].([]any)[0].(map[string]any)["values"] = map[string]any{"message": "after"}
	})
	readyAt(t, dc, instGVR, mgmt, "first", 2*time.Minute)
	if !follower.elected() {
		t.Error("the follower converged the edit without being elected")
	}
	if data, err := message(t, cs, apps); err != nil || data["message"] != "after" {
		t.Errorf("after the takeover, app-settings = %v, %v", data, err)
	}
	if err := dc.Resource(instGVR).Namespace(mgmt).Delete(t.Context(), "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "first uninstalled", func() (bool, string) {
		_, err := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "first", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
