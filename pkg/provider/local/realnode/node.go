package realnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kubeplug/kubeplug/pkg/provider/internal/clusterpki"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/podnet"
)

// Node is one real node of a cluster.
type Node struct {
	// Name is the Node's name.
	Name string
	// Index is the node's ordinal among the cluster's real nodes: its address
	// is Network.NodeIP(Index) and its Pod subnet podnet.PodCIDR(Index).
	Index int
	// Dir holds the node's files: <state>/machines/<node>/node.
	Dir string
	// Network is the cluster's node network.
	Network Network
	// Bins says where the programs are.
	Bins Bins
	// PKIDir is the cluster's PKI (its CA signs the node's identities).
	PKIDir string
	// ClusterCIDR and ServiceCIDR are the cluster's; the node's Pods get
	// podnet.PodCIDR(Index) inside ClusterCIDR's upper half.
	ClusterCIDR string
	// ClusterDNS is the DNS Service's address given to Pods.
	ClusterDNS string
	// Registry is host:port of the registry every image name is pulled through.
	Registry string
	// SandboxImage is the pause image, in Registry.
	SandboxImage string
	// KubeletArgs are extra kubelet flags (--name=value) from the model; they
	// come after kubeplug's own, so they win where the kubelet allows.
	KubeletArgs []string

	// selfConfigured: the node configures its own network inside its
	// namespace (a Machine, from its seed's network-config), so the host only
	// plugs its veth into the bridge.
	selfConfigured bool
}

// Bins are the programs a real node runs.
type Bins struct {
	// Kubelet and KubeProxy: the localcluster multicall binary's symlinks.
	Kubelet, KubeProxy string
	// Containerd and its shim (the shim is found next to containerd on PATH).
	Containerd string
	// Runc is the OCI runtime.
	Runc string
	// CNI is the directory of the CNI plugins.
	CNI string
}

// components in start order; Stop goes the other way.
var components = []string{"containerd", "kubelet", "kube-proxy"}

// netns is the path of the node's network namespace.
func (n *Node) netns() string { return "/run/netns/" + n.nsName() }

func (n *Node) nsName() string { return "kp" + n.Network.ID + "-" + n.Name }

// veth is the host side's interface name (at most 15 bytes).
func (n *Node) veth() string { return "kp" + n.Network.ID + "n" + strconv.Itoa(n.Index) }

// runDir holds the node's sockets; Unix socket paths are limited to 108 bytes.
func (n *Node) runDir() string {
	return filepath.Join("/run/kubeplug", n.Network.ID, strconv.Itoa(n.Index))
}

// CgroupParent is the node's cgroup in every hierarchy.
func (n *Node) CgroupParent() string { return "/kubeplug/" + n.Network.ID + "/" + n.Name }

func (n *Node) path(elem ...string) string { return filepath.Join(append([]string{n.Dir}, elem...)...) }

// Start brings the node up, or back up: namespace, veth, cgroups, identities,
// configuration, then containerd, kubelet and kube-proxy, each started only
// when it is not running already. It does not wait for the Node to be Ready.
func (n *Node) Start(ctx context.Context) error {
	for _, d := range []string{n.path("pki"), n.path("logs"), n.path("cni", "net.d"), n.path("certs.d"), n.runDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	if err := n.ensureNetns(ctx); err != nil {
		return fmt.Errorf("node %s: network: %w", n.Name, err)
	}
	if err := n.ensureCgroups(); err != nil {
		return fmt.Errorf("node %s: cgroups: %w", n.Name, err)
	}
	if err := n.writeConfig(); err != nil {
		return fmt.Errorf("node %s: configuration: %w", n.Name, err)
	}
	for _, comp := range components {
		want := n.fingerprint(comp)
		if n.alive(comp) {
			if have, _ := os.ReadFile(n.path(comp + ".fingerprint")); string(have) == want {
				continue
			}
			// Its flags or configuration changed: restart it (containers
			// survive a restart of containerd or the kubelet).
			if err := n.stopComponent(ctx, comp); err != nil {
				return fmt.Errorf("node %s: restart %s: %w", n.Name, comp, err)
			}
		}
		if err := os.WriteFile(n.path(comp+".fingerprint"), []byte(want), 0o644); err != nil {
			return err
		}
		if err := n.start(comp); err != nil {
			return fmt.Errorf("node %s: start %s: %w", n.Name, comp, err)
		}
		if comp == "containerd" {
			if err := n.waitSocket(ctx, 20*time.Second); err != nil {
				return fmt.Errorf("node %s: %w (log: %s)", n.Name, err, n.path("logs", "containerd.log"))
			}
		}
	}
	return nil
}

func (n *Node) ensureNetns(ctx context.Context) error {
	if _, err := os.Stat(n.netns()); err != nil {
		if _, err := run(ctx, "ip", "netns", "add", n.nsName()); err != nil {
			return err
		}
	}
	ns := n.nsName()
	if _, err := run(ctx, "ip", "-n", ns, "link", "show", "eth0"); err != nil {
		_, _ = run(ctx, "ip", "link", "del", n.veth()) // a host half left by an interrupted run
		if _, err := run(ctx, "ip", "link", "add", n.veth(), "type", "veth", "peer", "name", "eth0", "netns", ns); err != nil {
			return err
		}
	}
	steps := [][]string{{"link", "set", n.veth(), "master", n.Network.Bridge(), "up"}}
	if !n.selfConfigured {
		steps = append(steps,
			[]string{"-n", ns, "addr", "replace", n.Network.NodeIP(n.Index).String() + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"-n", ns, "route", "replace", "default", "via", n.Network.Gateway().String()})
	}
	for _, s := range steps {
		if _, err := run(ctx, "ip", s...); err != nil {
			return err
		}
	}
	// The host (the API server: aggregated APIs, webhooks) reaches the node's
	// Pods directly, unless another cluster's real node routes the same subnet.
	podCIDR := podnet.PodCIDR(n.ClusterCIDR, n.Index)
	if podCIDR == "" {
		return nil // a machine outside any cluster (a test's): no Pods to route
	}
	out, err := run(ctx, "ip", "-4", "route", "show", podCIDR)
	if err != nil {
		return err
	}
	if f := strings.Fields(out); len(f) > 0 && !strings.Contains(out, "dev "+n.Network.Bridge()+" ") && !strings.HasSuffix(strings.TrimSpace(out), "dev "+n.Network.Bridge()) {
		return fmt.Errorf("the Pod subnet %s is already routed on this machine (%s), probably to another local cluster's real node: give this cluster another clusterCIDR (the control-plane plugin's value)", podCIDR, strings.TrimSpace(out))
	}
	_, err = run(ctx, "ip", "route", "replace", podCIDR, "via", n.Network.NodeIP(n.Index).String(), "dev", n.Network.Bridge())
	return err
}

// RoutePeers routes the Pod subnets of the other real nodes through their
// addresses on the bridge, inside this node's namespace: Pod-to-Pod traffic
// between nodes crosses the bridge without the host forwarding it.
func (n *Node) RoutePeers(ctx context.Context, peers []*Node) error {
	for _, p := range peers {
		if p.Name == n.Name {
			continue
		}
		if _, err := run(ctx, "ip", "-n", n.nsName(), "route", "replace", podnet.PodCIDR(p.ClusterCIDR, p.Index), "via", p.Network.NodeIP(p.Index).String()); err != nil {
			return fmt.Errorf("node %s: route to node %s: %w", n.Name, p.Name, err)
		}
	}
	return nil
}

// hierarchies lists the mounted cgroup v1 hierarchies (their directories).
func hierarchies() ([]string, error) {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		dir := filepath.Join("/sys/fs/cgroup", e.Name())
		if e.Name() == "unified" || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
			out = append(out, dir)
		}
	}
	return out, nil
}

func (n *Node) ensureCgroups() error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		for _, sub := range []string{"", "system"} {
			dir := filepath.Join(h, n.CgroupParent(), sub)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if filepath.Base(h) == "cpuset" {
				// A new cpuset cgroup starts with no CPUs and no memory nodes.
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					if err := inheritCpuset(h, filepath.Join(n.CgroupParent(), sub), f); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// inheritCpuset copies file from each parent down to rel, where it is empty.
func inheritCpuset(root, rel, file string) error {
	dir := root
	val, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		return err
	}
	for _, part := range strings.Split(strings.Trim(rel, "/"), "/") {
		dir = filepath.Join(dir, part)
		cur, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(cur)) == "" {
			if err := os.WriteFile(filepath.Join(dir, file), val, 0o644); err != nil {
				return err
			}
		} else {
			val = cur
		}
	}
	return nil
}

// start starts comp detached, in the node's network namespace and system
// cgroup: a shell puts itself in the cgroups, then nsenter execs the program,
// so nothing it forks escapes the cgroups Stop kills.
func (n *Node) start(comp string) error {
	argv := n.argv(comp)
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	var script strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&script, "echo $$ > %s && ", shellQuote(filepath.Join(h, n.CgroupParent(), "system", "cgroup.procs")))
	}
	script.WriteString("exec nsenter --net=" + shellQuote(n.netns()) + " --")
	for _, a := range argv {
		script.WriteString(" " + shellQuote(a))
	}
	logf, err := os.OpenFile(n.path("logs", comp+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command("/bin/sh", "-c", script.String())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = n.Dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(n.Bins.Containerd)+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	// Reap it if it dies while this process lives (after that, init does).
	go func() { _ = cmd.Wait() }()
	return os.WriteFile(n.path(comp+".pid"), []byte(strconv.Itoa(pid)), 0o644)
}

// alive says whether comp's recorded process runs (and is comp).
func (n *Node) alive(comp string) bool {
	pid := n.pid(comp)
	if pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	// The shell execs nsenter, which execs the program: each stage names the
	// program's configuration file, which is this node's alone.
	return strings.Contains(string(cmdline), n.configFile(comp))
}

// fingerprint identifies what comp runs with: its arguments and the content
// of its configuration file.
func (n *Node) fingerprint(comp string) string {
	h := sha256.New()
	for _, a := range n.argv(comp) {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	cfg, _ := os.ReadFile(n.configFile(comp))
	h.Write(cfg)
	return hex.EncodeToString(h.Sum(nil))
}

// stopComponent stops one running component: SIGTERM, then SIGKILL after 10s.
func (n *Node) stopComponent(ctx context.Context, comp string) error {
	pid := n.pid(comp)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for n.alive(comp) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// running says whether pid is a process that has not exited (a zombie has).
func running(pid int) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses, which may hold spaces.
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// configFile is the configuration file comp is started with.
func (n *Node) configFile(comp string) string {
	switch comp {
	case "containerd":
		return n.path("containerd.toml")
	case "kubelet":
		return n.path("kubelet.yaml")
	}
	return n.path("kube-proxy.yaml")
}

func (n *Node) pid(comp string) int {
	b, err := os.ReadFile(n.path(comp + ".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func (n *Node) argv(comp string) []string {
	switch comp {
	case "containerd":
		return []string{n.Bins.Containerd, "--config", n.configFile(comp)}
	case "kubelet":
		args := []string{n.Bins.Kubelet,
			"--config=" + n.configFile(comp),
			"--kubeconfig=" + n.path("kubelet.kubeconfig"),
			"--root-dir=" + n.path("kubelet"),
			"--cert-dir=" + n.path("pki"),
			"--hostname-override=" + n.Name,
			"--node-ip=" + n.Network.NodeIP(n.Index).String(),
		}
		return append(args, n.KubeletArgs...)
	case "kube-proxy":
		return []string{n.Bins.KubeProxy, "--config=" + n.configFile(comp), "--hostname-override=" + n.Name}
	}
	return nil
}

func (n *Node) socket() string { return filepath.Join(n.runDir(), "containerd.sock") }

func (n *Node) waitSocket(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(n.socket()); err == nil {
			return nil
		}
		// Not alive(): while the shell execs nsenter and nsenter containerd,
		// the command line can read empty for an instant.
		if !running(n.pid("containerd")) {
			return errors.New("containerd exited at start")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd's socket %s did not appear within %s", n.socket(), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Issue writes the node's client identities (kubelet, kube-proxy).
func (n *Node) issue() error {
	if err := clusterpki.IssueClientCert(n.PKIDir, n.path("pki", "kubelet-client.crt"), n.path("pki", "kubelet-client.key"),
		"system:node:"+n.Name, "system:nodes"); err != nil {
		return err
	}
	return clusterpki.IssueClientCert(n.PKIDir, n.path("pki", "kube-proxy.crt"), n.path("pki", "kube-proxy.key"), "system:kube-proxy")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
