package realnode

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// machineImage is the image `make machine-image` built (or $KUBEPLUG_MACHINE_IMAGE).
func machineImage(t *testing.T) Image {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("booting a machine (runc, overlay mounts, network namespaces) needs root")
	}
	dir := os.Getenv("KUBEPLUG_MACHINE_IMAGE")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "..", "_output", "machine")
	}
	img, err := LoadImage(dir)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// testMachine makes a machine of its own network (bridge, nat chain) and
// registers the removal of both, checking that nothing is left.
func testMachine(t *testing.T, name string, userData string) *Machine {
	t.Helper()
	img := machineImage(t)
	state := t.TempDir()
	ctx := context.Background()
	id := ClusterID(state)
	subnet, err := ChooseSubnet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	network := Network{ID: id, Subnet: subnet, APIServerPort: 1}
	if err := network.EnsureBridge(ctx); err != nil {
		t.Fatal(err)
	}
	m := &Machine{
		Node:     &Node{Name: name, Index: 0, Dir: filepath.Join(state, "machines", name), Network: network},
		Image:    img,
		UserData: []byte(userData),
	}
	t.Cleanup(func() {
		if err := m.Remove(ctx); err != nil {
			t.Errorf("remove machine: %v", err)
		}
		if err := network.Teardown(ctx); err != nil {
			t.Errorf("teardown: %v", err)
		}
		assertMachineGone(ctx, t, m)
	})
	return m
}

// assertMachineGone checks each kind of leftover a machine could leave.
func assertMachineGone(ctx context.Context, t *testing.T, m *Machine) {
	t.Helper()
	n := m.Node
	if _, err := os.Stat(n.netns()); err == nil {
		t.Errorf("network namespace %s left", n.netns())
	}
	if out, err := run(ctx, "ip", "link", "show", n.veth()); err == nil {
		t.Errorf("veth left: %s", out)
	}
	if out, err := run(ctx, "ip", "link", "show", n.Network.Bridge()); err == nil {
		t.Errorf("bridge left: %s", out)
	}
	if mounted(m.path("rootfs")) {
		t.Errorf("root filesystem %s still mounted", m.path("rootfs"))
	}
	hs, _ := hierarchies()
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, n.CgroupParent())); err == nil {
			t.Errorf("cgroup %s left in %s", n.CgroupParent(), h)
		}
	}
	if out, _ := run(ctx, "iptables", "-w", "-t", "nat", "-S"); strings.Contains(out, n.Network.natChain()) {
		t.Errorf("nat chain %s left", n.Network.natChain())
	}
	if _, err := os.Stat(n.Dir); err == nil {
		t.Errorf("machine directory %s left", n.Dir)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), m.ContainerID()) {
			t.Errorf("process left: %s", strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}

// TestMachineBootsUserData boots a systemd machine from a cloud-config given
// as its NoCloud user data and checks, through the machine, that every stage
// ran: write_files, a unit enabled by runcmd, runcmd's own output in the
// journal, the network address from the seed.
func TestMachineBootsUserData(t *testing.T) {
	m := testMachine(t, "boot", `#cloud-config
write_files:
  - path: /etc/kubeplug-test/hello
    content: hello from user data
  - path: /etc/systemd/system/kubeplug-test.service
    content: |
      [Service]
      Type=oneshot
      RemainAfterExit=yes
      ExecStart=/bin/sh -c 'echo unit ran > /var/lib/kubeplug-test-unit'
      [Install]
      WantedBy=multi-user.target
runcmd:
  - [systemctl, daemon-reload]
  - [systemctl, enable, --now, kubeplug-test.service]
  - [sh, -c, 'echo runcmd-ran-inside-the-machine | systemd-cat -t kubeplug-test']
  - [sh, -c, 'echo run >> /var/lib/kubeplug-test-runs']
`)
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.WaitBooted(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	for argv, want := range map[string]string{
		"cat /etc/kubeplug-test/hello":              "hello from user data",
		"cat /var/lib/kubeplug-test-unit":           "unit ran",
		"journalctl -t kubeplug-test --no-pager":    "runcmd-ran-inside-the-machine",
		"ip -4 addr show eth0":                      m.Node.Network.NodeIP(0).String() + "/24",
		"hostname":                                  "boot",
		"cat /var/lib/cloud/data/instance-id":       "boot",
		"systemctl is-active containerd.service":    "active",
		"sh -c 'test ! -e /etc/kubeplug-test/host'": "",
	} {
		out, err := m.Exec(ctx, "sh", "-c", argv)
		if err != nil {
			t.Errorf("%s: %v", argv, err)
			continue
		}
		if !strings.Contains(out, want) {
			t.Errorf("%s = %q, want %q", argv, out, want)
		}
	}
	// Nothing of it reached the host.
	if _, err := os.Stat("/etc/kubeplug-test/hello"); err == nil {
		t.Error("the machine's file is on the host")
	}

	// A reboot from inside comes back by itself, as the same instance.
	if _, err := m.Exec(ctx, "systemctl", "reboot"); err != nil && !strings.Contains(err.Error(), "signal") {
		t.Logf("systemctl reboot: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if b, _ := os.ReadFile(m.path("console.log")); strings.Contains(string(b), "rebooted") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the machine did not reboot within 30 s (console: %s)", tail(m.path("console.log"), 10))
		}
	}
	if err := m.WaitBooted(ctx, 2*time.Minute); err != nil {
		t.Fatalf("after a reboot: %v", err)
	}
	if out, err := m.Exec(ctx, "cat", "/var/lib/kubeplug-test-runs"); err != nil || strings.Count(out, "run") != 1 {
		t.Errorf("after a reboot, runcmd ran %q times (%v), want once per instance", out, err)
	}

	// kill -9 of the machine's init: it is down, and Start boots it again.
	st, err := m.runc(ctx, "state", m.ContainerID())
	if err != nil {
		t.Fatal(err)
	}
	var state struct{ Pid int }
	if err := json.Unmarshal([]byte(st), &state); err != nil || state.Pid <= 0 {
		t.Fatalf("runc state %q: %v", st, err)
	}
	if err := syscall.Kill(state.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); m.Running(ctx); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the machine runs 20 s after kill -9 of its init")
		}
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.WaitBooted(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	// A stop and a start keep what the machine wrote and do not run the
	// per-instance steps again (cloud-init's runcmd runs once per instance).
	if err := m.Stop(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if m.Running(ctx) {
		t.Fatal("machine runs after Stop")
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.WaitBooted(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	out, err := m.Exec(ctx, "cat", "/var/lib/kubeplug-test-runs")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, "run") != 1 {
		t.Errorf("runcmd ran again after a restart of the same instance: %q", out)
	}
	if out, err := m.Exec(ctx, "cat", "/var/lib/kubeplug-test-unit"); err != nil || !strings.Contains(out, "unit ran") {
		t.Errorf("the machine's file is lost after a restart: %q %v", out, err)
	}
}

// TestMachineBootFailureNamesTheStep: a runcmd that fails inside the machine
// fails the boot, naming the machine and the step, with the journal.
// TestMachinePreflightNamesWhatIsMissing: one error naming each missing part.
func TestMachinePreflightNamesWhatIsMissing(t *testing.T) {
	err := MachinePreflight(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "cannot run machines") || !strings.Contains(err.Error(), "make machine-image") {
		t.Fatalf("preflight without an image = %v", err)
	}
}

func TestMachineBootFailureNamesTheStep(t *testing.T) {
	m := testMachine(t, "fails", `#cloud-config
runcmd:
  - [sh, -c, 'echo about-to-fail; exit 3']
`)
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	err := m.WaitBooted(ctx, 2*time.Minute)
	var be *BootError
	if !errors.As(err, &be) {
		t.Fatalf("err = %v, want a *BootError", err)
	}
	for _, want := range []string{"machine fails", "runcmd", "about-to-fail"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
