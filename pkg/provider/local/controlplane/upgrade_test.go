package controlplane_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/discovery"

	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
)

// TestUpgradeInterrupted starts a detached control plane on the previous
// minor's binaries (make localcluster-1.36), upgrades it to the current ones
// and interrupts the upgrade after etcd and kube-apiserver moved (as Ctrl-C
// would; the handle is then dropped, as after kill -9 of kubeplug). A new
// Attach and Upgrade finish it: every component runs the new binaries and the
// API server says the new version.
func TestUpgradeInterrupted(t *testing.T) {
	newDir, err := controlplane.FindBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	oldDir, err := controlplane.BuildDir("localcluster-1.36")
	if err == nil {
		oldDir, err = controlplane.FindBinDir(oldDir)
	}
	if err != nil {
		t.Fatalf("the previous minor is not built (make localcluster-1.36): %v", err)
	}
	oldVersion, err := controlplane.KubernetesVersion(oldDir)
	if err != nil {
		t.Fatal(err)
	}
	newVersion, err := controlplane.KubernetesVersion(newDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	opts := controlplane.Options{DataDir: filepath.Join(t.TempDir(), "cluster"), BinDir: oldDir, Detach: true, Logger: testLogger(t)}
	t.Cleanup(func() { _ = controlplane.StopDetached(context.Background(), opts) })
	cp, err := controlplane.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkServerVersion(t, cp, oldVersion)

	upCtx, interrupt := context.WithCancel(ctx)
	var moved []controlplane.Component
	err = cp.Upgrade(upCtx, newDir, controlplane.Flags{}, func(c controlplane.Component) {
		if c == controlplane.ControllerManager {
			interrupt()
		}
		moved = append(moved, c)
	})
	interrupt()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted upgrade = %v (components %v), want context.Canceled", err, moved)
	}

	cp, err = controlplane.Attach(ctx, opts)
	if err != nil {
		t.Fatalf("attach after the interrupted upgrade: %v", err)
	}
	if cp.BinDir() != newDir {
		t.Errorf("attached bin dir %s, want the new %s", cp.BinDir(), newDir)
	}
	moved = nil
	if err := cp.Upgrade(ctx, newDir, controlplane.Flags{}, func(c controlplane.Component) { moved = append(moved, c) }); err != nil {
		t.Fatalf("finish the upgrade: %v", err)
	}
	if want := controlplane.UpgradeOrder; len(moved) != len(want) {
		t.Errorf("upgraded %v, want %v in that order", moved, want)
	}
	for i := range moved {
		if moved[i] != controlplane.UpgradeOrder[i] {
			t.Errorf("upgraded %v, want %v in that order", moved, controlplane.UpgradeOrder)
			break
		}
	}
	want, err := filepath.EvalSymlinks(filepath.Join(newDir, string(controlplane.APIServer)))
	if err != nil {
		t.Fatal(err)
	}
	for comp, pid := range cp.ProcessGroups() {
		exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
		if err != nil || exe != want {
			t.Errorf("%s (pid %d) runs %q (%v), want %s", comp, pid, exe, err, want)
		}
	}
	checkServerVersion(t, cp, newVersion)
	if err := cp.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func checkServerVersion(t *testing.T, cp *controlplane.ControlPlane, want string) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v"+want {
		t.Errorf("server version %s, want v%s", v.GitVersion, want)
	}
}
