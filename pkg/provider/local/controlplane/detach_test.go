package controlplane_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/internal/portblock"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
)

const detachHelperEnv = "KUBEPLUG_CONTROLPLANE_DETACH_HELPER"

// TestDetachedOutlivesItsStarter starts a detached control plane from a child
// process that then exits, attaches to it from this one, changes an API server
// flag (observed by behaviour: a NodePort outside the old range is refused, then
// accepted), stops it through the attached handle and checks no process is left.
func TestDetachedOutlivesItsStarter(t *testing.T) {
	if os.Getenv(detachHelperEnv) != "" {
		return // this process is the helper
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	dataDir := filepath.Join(t.TempDir(), "cluster")
	opts := controlplane.Options{DataDir: dataDir, Logger: testLogger(t)}
	t.Cleanup(func() { _ = controlplane.StopDetached(context.Background(), opts) })

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperStartDetached$", "-test.v")
	cmd.Env = append(os.Environ(), detachHelperEnv+"="+dataDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}

	if _, err := controlplane.Start(ctx, controlplane.Options{DataDir: dataDir, Detach: true}); !errors.Is(err, controlplane.ErrRunning) {
		t.Fatalf("second Start = %v, want ErrRunning", err)
	}
	cp, err := controlplane.Attach(ctx, opts)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	pids := cp.ProcessGroups()
	if len(liveProcesses(t, pids)) != 5 {
		t.Fatalf("live components after the starter exited: %v", liveProcesses(t, pids))
	}
	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "np", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{
			{Port: 80, TargetPort: intstr.FromInt32(80), NodePort: 31500},
		}},
	}
	if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "range") {
		t.Fatalf("NodePort 31500 with range 30000-30100 = %v, want refused", err)
	}

	began := time.Now()
	restarted, err := cp.Reconfigure(ctx, controlplane.Flags{APIServerFlags: map[string]string{"service-node-port-range": "31000-31999"}})
	if err != nil {
		t.Fatalf("reconfigure: %v", err)
	}
	t.Logf("API server restarted with new flags in %s", time.Since(began).Round(time.Millisecond))
	if !slices.Equal(restarted, []controlplane.Component{controlplane.APIServer}) {
		t.Fatalf("restarted %v, want only the API server", restarted)
	}
	after := cp.ProcessGroups()
	for comp, pid := range pids {
		if changed := after[comp] != pid; changed != (comp == controlplane.APIServer) {
			t.Errorf("%s pid %d -> %d", comp, pid, after[comp])
		}
	}
	if h := cp.RESTConfig().Host; !strings.HasSuffix(h, ":"+strconv.Itoa(portOf(t, cp))) {
		t.Errorf("host %s", h)
	}
	waitFor(ctx, t, "NodePort 31500 accepted in the new range", func() error {
		_, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		return err
	})
	if again, err := cp.Reconfigure(ctx, controlplane.Flags{APIServerFlags: map[string]string{"service-node-port-range": "31000-31999"}}); err != nil || len(again) != 0 {
		t.Errorf("unchanged Reconfigure restarted %v, %v", again, err)
	}

	if err := cp.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if left := liveProcesses(t, after); len(left) > 0 {
		t.Errorf("alive after Stop: %v", left)
	}
	if running, err := controlplane.Running(dataDir); err != nil || running {
		t.Errorf("Running after Stop = %v, %v", running, err)
	}
	if _, err := controlplane.Attach(ctx, opts); !errors.Is(err, controlplane.ErrNotRunning) {
		t.Errorf("Attach after Stop = %v, want ErrNotRunning", err)
	}
	if err := controlplane.StopDetached(ctx, opts); !errors.Is(err, controlplane.ErrNotRunning) {
		t.Errorf("StopDetached after Stop = %v, want ErrNotRunning", err)
	}
}

func portOf(t *testing.T, cp *controlplane.ControlPlane) int {
	t.Helper()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(cp.Host(), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return n
}

// TestHelperStartDetached is the child of TestDetachedOutlivesItsStarter: it
// starts a detached control plane and exits without stopping it.
func TestHelperStartDetached(t *testing.T) {
	dataDir := os.Getenv(detachHelperEnv)
	if dataDir == "" {
		// Not a skip: this is not a check, only the body of the helper process.
		return
	}
	_, err := controlplane.Start(t.Context(), controlplane.Options{
		DataDir:        dataDir,
		Detach:         true,
		Logger:         testLogger(t),
		APIServerFlags: map[string]string{"service-node-port-range": "30000-30100"},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestDetachedStateErrors(t *testing.T) {
	t.Run("incompatible state version", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, controlplane.StateFile), []byte(`{"version": 999}`), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := controlplane.Start(t.Context(), controlplane.Options{DataDir: dir, Detach: true})
		if !errors.Is(err, controlplane.ErrIncompatibleState) || !strings.Contains(err.Error(), "version 999") {
			t.Errorf("Start = %v, want ErrIncompatibleState naming version 999", err)
		}
		if _, err := controlplane.Attach(t.Context(), controlplane.Options{DataDir: dir}); !errors.Is(err, controlplane.ErrIncompatibleState) {
			t.Errorf("Attach = %v, want ErrIncompatibleState", err)
		}
	})
	t.Run("API server port in use", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		port := l.Addr().(*net.TCPAddr).Port
		dir := t.TempDir()
		_, err = controlplane.Start(t.Context(), controlplane.Options{DataDir: dir, Detach: true, APIServerPort: port})
		if !errors.Is(err, controlplane.ErrPortInUse) {
			t.Fatalf("Start = %v, want ErrPortInUse", err)
		}
		want := "127.0.0.1:" + strconv.Itoa(port) + " is in use by process " + strconv.Itoa(os.Getpid())
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
		if _, err := os.Stat(filepath.Join(dir, controlplane.StateFile)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("state file after a failed start: %v", err)
		}
	})
	t.Run("detach needs a data directory", func(t *testing.T) {
		if _, err := controlplane.Start(t.Context(), controlplane.Options{Detach: true}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("DataDir")) {
			t.Errorf("Start = %v", err)
		}
	})
}

// TestDetachedClusterKeepsItsPortBlock: a detached control plane takes every
// port from one block outside the kernel's ephemeral range; while it runs, its
// block is its own even with no process of kubeplug holding the lock (another
// owner asking for exactly that block gets another); stopped and started
// again, it gets every port back.
func TestDetachedClusterKeepsItsPortBlock(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	opts := controlplane.Options{DataDir: filepath.Join(t.TempDir(), "cluster"), Detach: true, Logger: testLogger(t)}
	t.Cleanup(func() { _ = controlplane.StopDetached(context.Background(), opts) })
	cp, err := controlplane.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	first, err := controlplane.ChoosePorts(opts)
	if err != nil {
		t.Fatal(err)
	}
	all := append([]int{first.EtcdPeer}, slices.Collect(maps.Values(first.Components))...)
	base := all[0] - (all[0]-mustRegionStart(t))%portblock.Size
	for _, p := range all {
		if p < base || p >= base+portblock.Size {
			t.Fatalf("ports %v do not lie in one block (base %d)", first, base)
		}
	}
	other, err := portblock.Acquire(t.TempDir(), []int{base}, 6, func(owner string) bool {
		running, _ := controlplane.Running(owner)
		return running
	})
	if err != nil {
		t.Fatal(err)
	}
	if other.Base == base {
		t.Errorf("another owner was given block %d while the cluster runs on it", base)
	}
	other.Release()
	if err := cp.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	cp, err = controlplane.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start again: %v", err)
	}
	defer func() { _ = cp.Stop(context.Background()) }()
	again, err := controlplane.ChoosePorts(opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.EtcdPeer != first.EtcdPeer || !maps.Equal(again.Components, first.Components) {
		t.Errorf("ports after a stop and start: %v, want %v", again, first)
	}
}

func mustRegionStart(t *testing.T) int {
	t.Helper()
	first, n := portblock.Region()
	if n == 0 {
		t.Skip("no room for port blocks beside this kernel's ephemeral range")
	}
	return first
}
