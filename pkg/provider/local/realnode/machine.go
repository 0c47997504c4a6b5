package realnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kubeplug/kubeplug/internal/bounded"
)

// A Machine is a systemd machine of a local cluster: a whole Debian system
// booted under runc with systemd as PID 1, from an overlay of the machine
// image's layers, in the node's network namespace and cgroups (those of its
// Node). It receives its boot data the way a cloud machine does, through
// cloud-init's NoCloud seed: the user data is exactly the file `render` wrote
// for its pool; nothing else is started in it from outside.
//
// Its files: <Dir>/upper and <Dir>/work (the overlay's writable layer: what
// the machine wrote survives a stop and a reboot), <Dir>/rootfs (the merged
// mount), <Dir>/containerd (its /var/lib/containerd), <Dir>/config.json (the
// runc bundle's spec), <Dir>/console.log.
type Machine struct {
	// Node gives the machine its name, address, network namespace, cgroups
	// and its directory (Node.Dir).
	Node *Node
	// Image is the machine image (LoadImage).
	Image Image
	// UserData is the cloud-init user data: the rendered file, byte for byte.
	UserData []byte
	// VendorData is the provider's own cloud-config (what a cloud adds to
	// every machine: the cluster's registry, the node's credentials); cloud-init
	// merges it with the user data. Empty for none.
	VendorData []byte
	// InstanceID changes when the machine is replaced rather than rebooted:
	// cloud-init runs its per-instance steps again only for a new one.
	InstanceID string
	// Runc is the runc binary ("runc" on PATH when empty).
	Runc string
	// Programs is a kubeplug-localcluster binary of the cluster's Kubernetes
	// version, bind-mounted read-only over the image's (MachinePrograms), so
	// the machine's kubelet and kube-proxy are of the cluster's version, not
	// of the one the image was built with. Empty: the image's.
	Programs string
}

// MachinePrograms is where the machine image has the kubeplug-localcluster
// binary its kubelet and kube-proxy run (images/machine/build.sh).
const MachinePrograms = "/usr/local/lib/kubeplug/kubeplug-localcluster"

// Image is a machine image: its layers' directories, top first.
type Image struct {
	Layers []string
}

// ImageFile is the file naming the current image's layers in a machine image
// directory (written by images/machine/build.sh).
const ImageFile = "image.json"

// LoadImage reads the machine image that `make machine-image` built into dir.
func LoadImage(dir string) (Image, error) {
	p := filepath.Join(dir, ImageFile)
	b, err := bounded.ReadFile(p, 1<<16)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Image{}, fmt.Errorf("no machine image in %s: run `make machine-image`", dir)
		}
		return Image{}, err
	}
	var f struct{ Base, Node string }
	if err := json.Unmarshal(b, &f); err != nil {
		return Image{}, fmt.Errorf("%s: %w", p, err)
	}
	var img Image
	for _, l := range []string{f.Node, f.Base} {
		if l == "" || strings.ContainsAny(l, "/\\") || strings.HasPrefix(l, ".") {
			return Image{}, fmt.Errorf("%s: bad layer name %q", p, l)
		}
		d := filepath.Join(dir, l)
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return Image{}, fmt.Errorf("%s names layer %s, which is missing: run `make machine-image`", p, l)
		}
		img.Layers = append(img.Layers, d)
	}
	return img, nil
}

// MachinePreflight checks that this host can run machines from the image in
// imageDir — root, overlayfs, runc, the image — and names everything missing
// in one error.
func MachinePreflight(imageDir string) error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (machines need mounts, network namespaces and cgroups)")
	}
	if fs, err := bounded.ReadFile("/proc/filesystems", 1<<20); err != nil || !strings.Contains(string(fs), "\toverlay\n") {
		missing = append(missing, "overlayfs in the kernel (/proc/filesystems lists no overlay)")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		missing = append(missing, "runc (make node-deps)")
	}
	if _, err := LoadImage(imageDir); err != nil {
		missing = append(missing, err.Error())
	}
	if len(missing) > 0 {
		return fmt.Errorf("this host cannot run machines: missing %s", strings.Join(missing, "; "))
	}
	return nil
}

func (m *Machine) path(elem ...string) string { return m.Node.path(elem...) }

// ContainerID is the machine's name for runc.
func (m *Machine) ContainerID() string { return m.Node.nsName() }

// runcRoot keeps runc's state of the cluster's machines below the run directory.
func (m *Machine) runcRoot() string { return filepath.Join(m.Node.runDir(), "runc") }

// runcBin is the runc binary the machine runs under.
func (m *Machine) runcBin() string {
	if m.Runc == "" {
		return "runc"
	}
	return m.Runc
}

func (m *Machine) runc(ctx context.Context, args ...string) (string, error) {
	return run(ctx, m.runcBin(), append([]string{"--root", m.runcRoot()}, args...)...)
}

// Running reports whether the machine's init runs.
func (m *Machine) Running(ctx context.Context) bool {
	out, err := m.runc(ctx, "state", m.ContainerID())
	if err != nil {
		return false
	}
	var st struct{ Status string }
	return json.Unmarshal([]byte(out), &st) == nil && st.Status == "running"
}

// Start boots the machine, or does nothing when it runs. Network namespace,
// veth and cgroups come from its Node; the overlay and the seed are (re)made
// each time; the writable layer is kept, so a stopped machine boots again
// with what it wrote (cloud-init then skips its per-instance steps).
func (m *Machine) Start(ctx context.Context) error {
	if m.Running(ctx) {
		return nil
	}
	n := m.Node
	// A machine whose init died leaves runc's record behind.
	_, _ = m.runc(ctx, "delete", "--force", m.ContainerID())
	for _, d := range []string{m.path("upper"), m.path("work"), m.path("rootfs"), m.path("containerd"), n.runDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("machine %s: %w", n.Name, err)
		}
	}
	n.selfConfigured = true
	if err := n.ensureNetns(ctx); err != nil {
		return fmt.Errorf("machine %s: network: %w", n.Name, err)
	}
	if err := n.ensureCgroups(); err != nil {
		return fmt.Errorf("machine %s: cgroups: %w", n.Name, err)
	}
	if err := m.mountRoot(); err != nil {
		return fmt.Errorf("machine %s: root filesystem: %w", n.Name, err)
	}
	if err := m.writeSeed(); err != nil {
		return fmt.Errorf("machine %s: boot data: %w", n.Name, err)
	}
	if err := m.writeSpec(); err != nil {
		return fmt.Errorf("machine %s: %w", n.Name, err)
	}
	console, err := os.OpenFile(m.path("console.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("machine %s: %w", n.Name, err)
	}
	defer func() { _ = console.Close() }()
	m.stopSupervisor()
	cmd := exec.Command("/bin/sh", "-c", superviseScript, "kubeplug-machine", m.runcBin(), m.runcRoot(), m.path(), m.ContainerID()) //nolint:gosec // runc, with the machine's own paths
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, console, console
	// Its own session: it outlives this process, as the machine does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("machine %s: start runc: %w", n.Name, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	if err := os.WriteFile(m.path(supervisorPidFile), []byte(strconv.Itoa(pid)), 0o600); err != nil {
		return fmt.Errorf("machine %s: %w", n.Name, err)
	}
	for deadline := time.Now().Add(30 * time.Second); !m.Running(ctx); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) || !processAlive(pid) {
			return fmt.Errorf("machine %s: runc did not start it (console: %s)", n.Name, tail(m.path("console.log"), 10))
		}
	}
	return nil
}

// superviseScript runs a machine in the foreground under runc and runs it
// again when its init ended by a reboot: reboot(2) in a pid namespace ends
// the namespace's init with SIGHUP, and runc exits 129. A halt (exit 0), a
// kill -9 (137) or a failure ends the supervisor; the next `up` starts it.
const superviseScript = `runc=$1 root=$2 bundle=$3 id=$4
while :; do
	"$runc" --root "$root" run --bundle "$bundle" "$id" </dev/null
	rc=$?
	"$runc" --root "$root" delete --force "$id" 2>/dev/null
	[ "$rc" = 129 ] || exit "$rc"
	echo "kubeplug: machine $id rebooted"
done
`

// supervisorPidFile holds the pid of the machine's superviseScript.
const supervisorPidFile = "supervisor.pid"

// supervisorPid is the pid of the machine's supervisor when it runs, else 0.
func (m *Machine) supervisorPid() int {
	b, err := os.ReadFile(m.path(supervisorPidFile)) //nolint:gosec // the machine's own directory
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !processAlive(pid) {
		return 0
	}
	// Only when the pid still is this machine's supervisor.
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !strings.Contains(string(cmdline), "kubeplug-machine") || !strings.Contains(string(cmdline), m.ContainerID()) {
		return 0
	}
	return pid
}

// supervised says whether the machine's supervisor runs.
func (m *Machine) supervised() bool { return m.supervisorPid() > 0 }

// stopSupervisor kills the machine's supervisor (not the machine), so that
// a halt is not followed by a new boot.
func (m *Machine) stopSupervisor() {
	if pid := m.supervisorPid(); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for deadline := time.Now().Add(5 * time.Second); processAlive(pid) && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
	}
	_ = os.Remove(m.path(supervisorPidFile))
}

// processAlive says whether pid runs (and is not a zombie).
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// mountRoot mounts the overlay of the image's layers and the machine's
// writable layer on <Dir>/rootfs, unless it is mounted.
func (m *Machine) mountRoot() error {
	root := m.path("rootfs")
	if mounted(root) {
		return nil
	}
	if len(m.Image.Layers) == 0 {
		return errors.New("the machine image has no layers")
	}
	opts := "lowerdir=" + strings.Join(m.Image.Layers, ":") + ",upperdir=" + m.path("upper") + ",workdir=" + m.path("work")
	if err := syscall.Mount("overlay", root, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay on %s: %w", root, err)
	}
	return nil
}

// mounted reports whether dir is a mount point.
func mounted(dir string) bool {
	points, err := mountPoints()
	return err == nil && slices.Contains(points, dir)
}

// seedDir is where cloud-init's NoCloud datasource reads the boot data.
const seedDir = "var/lib/cloud/seed/nocloud"

// writeSeed writes the NoCloud seed: meta-data (instance ID, host name), the
// user data as given, the vendor data, and a network configuration giving
// eth0 the node's address on the cluster's bridge.
func (m *Machine) writeSeed() error {
	n := m.Node
	dir := filepath.Join(m.path("rootfs"), seedDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	id := m.InstanceID
	if id == "" {
		id = n.Name
	}
	meta := fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", id, n.Name)
	netcfg := fmt.Sprintf(`version: 2
ethernets:
  eth0:
    match: {name: eth0}
    addresses: [%s/24]
    routes: [{to: 0.0.0.0/0, via: %s}]
    nameservers: {addresses: [%s]}
    dhcp4: false
    dhcp6: false
    accept-ra: false
`, n.Network.NodeIP(n.Index), n.Network.Gateway(), n.Network.Gateway())
	files := map[string][]byte{
		"meta-data":      []byte(meta),
		"user-data":      m.UserData,
		"network-config": []byte(netcfg),
	}
	if len(m.VendorData) > 0 {
		files["vendor-data"] = m.VendorData
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	if len(m.VendorData) == 0 {
		_ = os.Remove(filepath.Join(dir, "vendor-data"))
	}
	return nil
}

// writeSpec writes the runc bundle's config.json: systemd as PID 1 the way kind
// runs a node — a private cgroup namespace with /sys/fs/cgroup writable (systemd
// makes its own cgroups), /sys otherwise read-only (writable, the boot waits on
// udev), tmpfs /run, /run/lock and /tmp — in the node's network namespace and
// below its cgroup parent. Stopped by SIGRTMIN+3, systemd's halt signal.
func (m *Machine) writeSpec() error {
	n := m.Node
	caps := []string{
		"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
		"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
		"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
		"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
		"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG",
		"CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP",
		"CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND",
		"CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
		// Not CAP_SYS_RESOURCE: this host's bounding set lacks it.
	}
	caps = boundedCaps(caps)
	tmpfs := func(dst, opts string) map[string]any {
		return map[string]any{"destination": dst, "type": "tmpfs", "source": "tmpfs",
			"options": strings.Split(opts, ",")}
	}
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"terminal": false,
			"user":     map[string]any{"uid": 0, "gid": 0},
			"args":     []string{"/sbin/init"},
			"env": []string{"container=docker", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				"TERM=dumb"},
			"cwd": "/",
			"capabilities": map[string]any{"bounding": caps, "effective": caps, "permitted": caps,
				"inheritable": []string{}, "ambient": []string{}},
			"noNewPrivileges": false,
		},
		"root":     map[string]any{"path": m.path("rootfs"), "readonly": false},
		"hostname": n.Name,
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc", "options": []string{"nosuid", "noexec", "nodev"}},
			{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": []string{"nosuid", "noexec", "nodev"}},
			{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "ro"}},
			{"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": []string{"nosuid", "noexec", "nodev", "relatime", "rw"}},
			tmpfs("/run", "nosuid,nodev,mode=755"),
			tmpfs("/run/lock", "nosuid,nodev,noexec,mode=1777"),
			tmpfs("/tmp", "nosuid,nodev,mode=1777"),
			// containerd's overlay snapshots cannot sit on the machine's
			// overlay root (overlayfs refuses an overlayfs upper layer): its
			// root is a directory of the host's file system, as kind gives
			// its nodes' /var a volume.
			{"destination": "/var/lib/containerd", "type": "bind", "source": m.path("containerd"), "options": []string{"rbind", "rw"}},
		},
		"linux": map[string]any{
			"cgroupsPath": n.CgroupParent() + "/machine",
			"namespaces": []map[string]any{
				{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "cgroup"},
				{"type": "network", "path": n.netns()},
			},
			"resources": map[string]any{
				"devices": []map[string]any{{"allow": true, "access": "rwm"}},
			},
			"devices": []map[string]any{
				{"path": "/dev/fuse", "type": "c", "major": 10, "minor": 229, "fileMode": 438, "uid": 0, "gid": 0},
				{"path": "/dev/kmsg", "type": "c", "major": 1, "minor": 11, "fileMode": 420, "uid": 0, "gid": 0},
			},
			"maskedPaths":   []string{"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"},
			"readonlyPaths": []string{},
		},
	}
	if m.Programs != "" {
		spec["mounts"] = append(spec["mounts"].([]map[string]any),
			map[string]any{"destination": MachinePrograms, "type": "bind", "source": m.Programs, "options": []string{"bind", "ro"}})
	}
	if st, err := os.Stat("/lib/modules"); err == nil && st.IsDir() {
		// kube-proxy and containerd probe kernel modules.
		spec["mounts"] = append(spec["mounts"].([]map[string]any),
			map[string]any{"destination": "/lib/modules", "type": "bind", "source": "/lib/modules", "options": []string{"rbind", "ro"}})
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(m.path("config.json"), b, 0o600)
}

// boundedCaps keeps the capabilities this process may pass on (its bounding
// set), so runc does not refuse the spec on a host that dropped some.
func boundedCaps(caps []string) []string {
	b, err := bounded.ReadFile("/proc/self/status", 1<<20)
	if err != nil {
		return caps
	}
	var bnd uint64
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			bnd, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	var out []string
	for _, c := range caps {
		if i, ok := capNumbers[c]; ok && bnd&(1<<i) == 0 {
			continue
		}
		out = append(out, c)
	}
	return out
}

var capNumbers = map[string]uint{
	"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3, "CAP_FSETID": 4,
	"CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SETPCAP": 8, "CAP_LINUX_IMMUTABLE": 9,
	"CAP_NET_BIND_SERVICE": 10, "CAP_NET_BROADCAST": 11, "CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13,
	"CAP_IPC_LOCK": 14, "CAP_IPC_OWNER": 15, "CAP_SYS_MODULE": 16, "CAP_SYS_RAWIO": 17,
	"CAP_SYS_CHROOT": 18, "CAP_SYS_PTRACE": 19, "CAP_SYS_PACCT": 20, "CAP_SYS_ADMIN": 21,
	"CAP_SYS_BOOT": 22, "CAP_SYS_NICE": 23, "CAP_SYS_RESOURCE": 24, "CAP_SYS_TIME": 25,
	"CAP_SYS_TTY_CONFIG": 26, "CAP_MKNOD": 27, "CAP_LEASE": 28, "CAP_AUDIT_WRITE": 29,
	"CAP_AUDIT_CONTROL": 30, "CAP_SETFCAP": 31, "CAP_MAC_OVERRIDE": 32, "CAP_MAC_ADMIN": 33,
	"CAP_SYSLOG": 34, "CAP_WAKE_ALARM": 35, "CAP_BLOCK_SUSPEND": 36, "CAP_AUDIT_READ": 37,
	"CAP_PERFMON": 38, "CAP_BPF": 39, "CAP_CHECKPOINT_RESTORE": 40,
}

// Exec runs argv inside the machine (its namespaces, as root) and returns its
// output (stdout and stderr together).
func (m *Machine) Exec(ctx context.Context, argv ...string) (string, error) {
	args := append([]string{"--root", m.runcRoot(), "exec", "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		m.ContainerID()}, argv...)
	out, err := exec.CommandContext(ctx, m.runcBin(), args...).CombinedOutput()
	if len(out) > 1<<20 {
		out = out[len(out)-1<<20:]
	}
	if err != nil {
		return string(out), fmt.Errorf("machine %s: %s: %w: %s", m.Node.Name, strings.Join(argv, " "), err, strings.TrimSpace(lastLines(string(out), 10)))
	}
	return string(out), nil
}

// BootError is a machine whose boot data failed inside it.
type BootError struct {
	Machine string
	// What failed: cloud-init's own errors, failed units.
	Failures []string
	// Journal is an excerpt of the machine's journal around the failure.
	Journal string
}

func (e *BootError) Error() string {
	msg := fmt.Sprintf("machine %s: boot failed: %s", e.Machine, strings.Join(e.Failures, "; "))
	if e.Journal != "" {
		msg += "\njournal of " + e.Machine + ":\n" + e.Journal
	}
	return msg
}

// WaitBooted waits until cloud-init ran every stage in the machine and systemd
// finished starting it, then reports a failed runcmd, write_files or unit as a
// *BootError with the machine's journal excerpt.
func (m *Machine) WaitBooted(ctx context.Context, timeout time.Duration) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		out, err := m.Exec(ctx, "cloud-init", "status", "--format", "json")
		var st struct {
			Status string   `json:"status"`
			Errors []string `json:"errors"`
		}
		if err == nil || strings.Contains(out, "{") {
			if i := strings.Index(out, "{"); i >= 0 && json.Unmarshal([]byte(out[i:]), &st) == nil {
				last = st.Status
				if st.Status == "done" || st.Status == "error" {
					return m.bootResult(ctx, st.Errors)
				}
			}
		}
		// Between a reboot's end and the next boot the machine does not run
		// for a moment; only without its supervisor is it down.
		if !m.Running(ctx) && !m.supervised() {
			return fmt.Errorf("machine %s: its init stopped while booting (console: %s)", m.Node.Name, tail(m.path("console.log"), 15))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("machine %s: cloud-init did not finish within %s (status %q); journal:\n%s", m.Node.Name, timeout, last, m.Journal(context.WithoutCancel(parent), "", 30))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (m *Machine) bootResult(ctx context.Context, cloudInitErrors []string) error {
	failures := append([]string{}, cloudInitErrors...)
	// systemd settles after cloud-init's final stage; wait for it briefly, then
	// name failed units.
	_, _ = m.Exec(ctx, "systemctl", "is-system-running", "--wait")
	out, _ := m.Exec(ctx, "systemctl", "list-units", "--state=failed", "--no-legend", "--plain")
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			failures = append(failures, "unit "+f[0]+" failed")
		}
	}
	if len(failures) == 0 {
		return nil
	}
	return &BootError{Machine: m.Node.Name, Failures: failures, Journal: m.Journal(ctx, "", 40)}
}

// Journal returns the last lines of the machine's journal (of one unit when
// unit is not empty).
func (m *Machine) Journal(ctx context.Context, unit string, lines int) string {
	args := []string{"journalctl", "--no-pager", "-o", "short", "-n", strconv.Itoa(lines)}
	if unit != "" {
		args = append(args, "-u", unit)
	}
	out, err := m.Exec(ctx, args...)
	if err != nil {
		return "(journal unavailable: " + err.Error() + ")"
	}
	return strings.TrimRight(out, "\n")
}

// Stop halts the machine (SIGRTMIN+3: systemd stops its units and exits),
// kills what is left after grace, and removes what its Node made outside Dir
// (processes, mounts, cgroups, namespace, veth). The writable layer stays:
// Remove deletes it.
func (m *Machine) Stop(ctx context.Context, grace time.Duration) error {
	m.stopSupervisor()
	if m.Running(ctx) {
		_, _ = m.runc(ctx, "kill", m.ContainerID(), "37")
		deadline := time.Now().Add(grace)
		for m.Running(ctx) && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
	}
	_, _ = m.runc(ctx, "kill", "--all", m.ContainerID(), "KILL")
	var errs []error
	if err := m.Node.Stop(ctx); err != nil {
		errs = append(errs, err)
	}
	// runc's record lived in the run directory, which Node.Stop removed.
	if mounted(m.path("rootfs")) {
		if err := syscall.Unmount(m.path("rootfs"), syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("machine %s: unmount root: %w", m.Node.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Remove stops the machine and deletes its directory.
func (m *Machine) Remove(ctx context.Context) error {
	if err := m.Stop(ctx, 10*time.Second); err != nil {
		return err
	}
	return os.RemoveAll(m.Node.Dir)
}

func tail(path string, n int) string {
	b, err := bounded.ReadFile(path, 4<<20)
	if err != nil {
		return "(none)"
	}
	return lastLines(string(b), n)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
