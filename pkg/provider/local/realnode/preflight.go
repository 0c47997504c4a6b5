package realnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrCannotHost is wrapped by Preflight's error: this machine cannot run real
// nodes (simulated pools still work).
var ErrCannotHost = errors.New("this machine cannot run real nodes")

// Preflight checks, before anything starts, that this machine can run real
// nodes with bins: root, overlayfs, bridges, the cgroup hierarchies the kubelet
// needs, and the programs. The error lists everything missing at once.
func Preflight(bins Bins, registryBin string) error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (real nodes create network namespaces, bridges and cgroups)")
	}
	fs, err := os.ReadFile("/proc/filesystems")
	if err != nil || !strings.Contains(string(fs), "overlay") {
		missing = append(missing, "the overlay filesystem (containerd's snapshotter)")
	}
	if _, err := os.Stat("/sys/class/net"); err != nil {
		missing = append(missing, "sysfs network classes (bridges and veth pairs)")
	}
	for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c, "cgroup.procs")); err != nil {
			missing = append(missing, "the cgroup v1 "+c+" hierarchy at /sys/fs/cgroup/"+c)
		}
	}
	for _, p := range []struct{ what, path string }{
		{"kubelet", bins.Kubelet}, {"kube-proxy", bins.KubeProxy}, {"containerd (make localnode)", bins.Containerd},
		{"containerd-shim-runc-v2 (make localnode)", filepath.Join(filepath.Dir(bins.Containerd), "containerd-shim-runc-v2")},
		{"kubeplug-registry (make localnode)", registryBin}, {"runc (make node-deps)", bins.Runc},
	} {
		if _, err := os.Stat(p.path); err != nil {
			missing = append(missing, p.what+" at "+p.path)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "portmap", "loopback"} {
		if _, err := os.Stat(filepath.Join(bins.CNI, plugin)); err != nil {
			missing = append(missing, "the CNI plugin "+plugin+" in "+bins.CNI+" (make node-deps)")
		}
	}
	for _, prog := range []string{"ip", "iptables", "iptables-save", "iptables-restore", "nsenter", "conntrack"} {
		if _, err := exec.LookPath(prog); err != nil {
			missing = append(missing, prog+" on PATH (make node-deps)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s; simulated pools still work", ErrCannotHost, strings.Join(missing, "; "))
	}
	return nil
}
