package hosts

import (
	"context"
	"fmt"
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
	var fails []string
	if !strings.HasSuffix(get("init"), "/systemd") {
		fails = append(fails, fmt.Sprintf("init: PID 1 is %q, not systemd", get("init")))
	}
	if a := get("arch"); a != "x86_64" && a != "aarch64" {
		fails = append(fails, "arch: "+a+" is not amd64 or arm64")
	}
	if get("swap") != "0" {
		fails = append(fails, "swap: on ("+get("swap")+" swap areas in /proc/swaps); the kubelet needs it off: swapoff -a and remove it from /etc/fstab")
	}
	if get("overlay") == "0" {
		fails = append(fails, "overlay: the kernel has no overlayfs (containerd's snapshotter): modprobe overlay")
	}
	if get("runc") == "" {
		fails = append(fails, "runc: not installed (apt-get install runc)")
	}
	if get("cni") == "" {
		fails = append(fails, "cni: no CNI plugins in /usr/lib/cni or /opt/cni/bin (apt-get install containernetworking-plugins)")
	}
	if t, err := strconv.ParseInt(get("time"), 10, 64); err != nil {
		fails = append(fails, "time: unreadable date on the host")
	} else {
		host := time.Unix(t, 0)
		mid := before.Add(after.Sub(before) / 2)
		if skew := host.Sub(mid); skew > maxClockSkew+time.Second || -skew > maxClockSkew+time.Second {
			fails = append(fails, fmt.Sprintf("time: the host's clock is %s off this machine's (at most %s): run NTP on it", skew.Round(time.Second), maxClockSkew))
		}
	}
	if get("delivered") == "" {
		for _, e := range kv["exists"] {
			fails = append(fails, "existing: "+strings.TrimSpace(e)+" is there and not kubeplug's (down would remove it): remove the other container runtime or Kubernetes installation first")
		}
		ports := []int{10250}
		if controlPlane {
			ports = append(ports, 6443, 2379, 2380, 10257, 10259)
		}
		for _, p := range ports {
			hex := fmt.Sprintf("%04X", p)
			for _, l := range kv["listen"] {
				if strings.EqualFold(l, hex) {
					fails = append(fails, fmt.Sprintf("ports: %d is in use on the host", p))
					break
				}
			}
		}
	}
	if len(fails) > 0 {
		return fmt.Errorf("%s: preflight failed (os %s): %s", label(c.host), get("os"), strings.Join(fails, "; "))
	}
	return nil
}
