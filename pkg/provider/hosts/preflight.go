package hosts

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxClockSkew is how far a host's clock may be from this machine's:
// certificates and bootstrap tokens carry times.
const maxClockSkew = 30 * time.Second

// preflightScript prints what preflight checks, one key=value a line.
const preflightScript = `
. /etc/os-release 2>/dev/null; echo "os=${ID:-unknown}"
echo "arch=$(uname -m)"
echo "init=$(readlink /proc/1/exe)"
echo "swap=$(tail -n +2 /proc/swaps | wc -l)"
echo "overlay=$(grep -c -w overlay /proc/filesystems)"
echo "runc=$(command -v runc)"
for d in /usr/lib/cni /opt/cni/bin; do [ -x "$d/bridge" ] && echo "cni=$d"; done
echo "time=$(date +%s)"
echo "delivered=$([ -f ` + manifestPath + ` ] && echo yes)"
for l in /usr/bin/kubelet /usr/bin/kube-proxy /usr/local/bin/containerd /etc/containerd /var/lib/containerd /etc/kubernetes /var/lib/kubelet; do [ -L "$l" ] || [ -f "$l" ] || [ -n "$(ls -A "$l" 2>/dev/null)" ] && echo "exists=$l"; done
awk 'NR>1 && $4=="0A" {split($2,a,":"); print "listen=" a[2]}' /proc/net/tcp /proc/net/tcp6 2>/dev/null
`

// preflight checks that a host can become a node: Linux with systemd as
// init, no swap, overlayfs, runc and the CNI plugins, its clock close to
// this machine's, root through sudo without a password, and (before the
// provider first delivered to it) the node's ports free and no container
// runtime or kubelet of another origin. Every failed check is named in one error.
func (c *client) preflight(ctx context.Context, controlPlane bool) error {
	before := time.Now()
	out, err := c.run(ctx, "preflight", preflightScript, nil)
	if err != nil {
		return err
	}
	after := time.Now()
	kv := map[string][]string{}
	for line := range strings.SplitSeq(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[k] = append(kv[k], v)
		}
	}
	get := func(k string) string {
		if v := kv[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	fails := hostFails(get)
	if f := clockFail(get("time"), before, after); f != "" {
		fails = append(fails, f)
	}
	if get("delivered") == "" {
		fails = append(fails, foreignFails(kv, controlPlane)...)
	}
	if len(fails) > 0 {
		return fmt.Errorf("%s: preflight failed (os %s): %s", label(c.host), get("os"), strings.Join(fails, "; "))
	}
	return nil
}

// preflightRules are the host's own requirements: each a check of what the
// preflight script reported and what to say when it fails.
var preflightRules = []struct {
	key  string
	fail func(v string) bool
	say  func(v string) string
}{
	{"init", func(v string) bool { return !strings.HasSuffix(v, "/systemd") }, func(v string) string { return fmt.Sprintf("init: PID 1 is %q, not systemd", v) }},
	{"arch", func(v string) bool { return v != "x86_64" && v != "aarch64" }, func(v string) string { return "arch: " + v + " is not amd64 or arm64" }},
	{"swap", func(v string) bool { return v != "0" }, func(v string) string {
		return "swap: on (" + v + " swap areas in /proc/swaps); the kubelet needs it off: swapoff -a and remove it from /etc/fstab"
	}},
	{"overlay", func(v string) bool { return v == "0" }, func(string) string {
		return "overlay: the kernel has no overlayfs (containerd's snapshotter): modprobe overlay"
	}},
	{"runc", func(v string) bool { return v == "" }, func(string) string { return "runc: not installed (apt-get install runc)" }},
	{"cni", func(v string) bool { return v == "" }, func(string) string {
		return "cni: no CNI plugins in /usr/lib/cni or /opt/cni/bin (apt-get install containernetworking-plugins)"
	}},
}

// hostFails are the preflightRules that fail.
func hostFails(get func(string) string) []string {
	var fails []string
	for _, r := range preflightRules {
		if v := get(r.key); r.fail(v) {
			fails = append(fails, r.say(v))
		}
	}
	return fails
}

// clockFail says how far the host's clock (unix seconds, as date +%s printed
// it between before and after) is off this machine's, when more than
// maxClockSkew.
func clockFail(unix string, before, after time.Time) string {
	t, err := strconv.ParseInt(unix, 10, 64)
	if err != nil {
		return "time: unreadable date on the host"
	}
	mid := before.Add(after.Sub(before) / 2)
	if skew := time.Unix(t, 0).Sub(mid); skew > maxClockSkew+time.Second || -skew > maxClockSkew+time.Second {
		return fmt.Sprintf("time: the host's clock is %s off this machine's (at most %s): run NTP on it", skew.Round(time.Second), maxClockSkew)
	}
	return ""
}

// foreignFails are what stands in the way on a host kubeplug has not
// delivered to yet: another runtime or kubelet, and the node's ports in use.
func foreignFails(kv map[string][]string, controlPlane bool) []string {
	var fails []string
	for _, e := range kv["exists"] {
		fails = append(fails, "existing: "+strings.TrimSpace(e)+" is there and not kubeplug's (down would remove it): remove the other container runtime or Kubernetes installation first")
	}
	ports := []int{10250}
	if controlPlane {
		ports = append(ports, 6443, 2379, 2380, 10257, 10259)
	}
	for _, p := range ports {
		if slices.ContainsFunc(kv["listen"], func(l string) bool { return strings.EqualFold(l, fmt.Sprintf("%04X", p)) }) {
			fails = append(fails, fmt.Sprintf("ports: %d is in use on the host", p))
		}
	}
	return fails
}
