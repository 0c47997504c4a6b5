package hosts

import (
	"context"
	"fmt"
	"strings"
)

// units are the systemd units the provider or the rendered files may have
// started on a host, stopped by clean before the files go.
var units = []string{"kubeplug-after-deploy.path", "kubeplug-after-deploy.service", "kubeplug-boot.service", "kube-proxy.service", "kubelet.service", "containerd.service", "kubeplug-registry.service"}

// cleanScript stops kubeplug's units, kills what they left (the containers'
// shims), unmounts what the kubelet and containerd mounted, and removes every
// file the delivered list names, the links, and the node's state directories.
const cleanScript = `
list=` + manifestPath + `
# The units the delivered files define (the plugins' among them), then kubeplug's own.
delivered_units=
[ -f "$list" ] && delivered_units=$(grep -o '"path":"/etc/systemd/system/[^"/]*\.\(service\|path\|timer\|socket\)"' "$list" | cut -d'"' -f4 | xargs -r -n1 basename)
for u in $delivered_units %[1]s; do systemctl disable --now "$u" >/dev/null 2>&1 || true; done
pkill -9 -f '[/]usr/local/bin/containerd-shim-runc-v2' 2>/dev/null || true
# The containers' processes, by the kubelet's cgroups (cgroupfs driver).
for i in 1 2 3; do
  find /sys/fs/cgroup -path '*kubepods*' -name cgroup.procs 2>/dev/null | while read -r f; do xargs -r kill -9 <"$f" 2>/dev/null; done
  sleep 0.5
done
find /sys/fs/cgroup -depth -type d -path '*kubepods*' -exec rmdir {} + 2>/dev/null || true
[ -x /usr/bin/kube-proxy ] && /usr/bin/kube-proxy --cleanup >/dev/null 2>&1 || true
ip link del cbr0 2>/dev/null || true
grep -o ' /var/lib/kubelet[^ ]*\| /run/containerd[^ ]*\| /var/lib/containerd[^ ]*' /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
if [ -f "$list" ]; then
  grep -o '"path":"[^"]*"' "$list" | cut -d'"' -f4 | while read -r f; do rm -f "$f" "$f.kubeplug-tmp"; done
fi
for l in %[2]s; do [ "$(readlink "$l")" = ` + localclusterPath + ` ] && rm -f "$l"; done
rm -f /var/tmp/kubeplug-upload.*
rm -rf /usr/local/lib/kubeplug /var/lib/kubeplug /etc/kubernetes /var/lib/kubelet /var/lib/kube-proxy /etc/cni/net.d/10-kubeplug.conflist /etc/containerd /run/containerd /var/lib/etcd
# containerd's root may be a mount point (emptied, not removed).
rm -rf /var/lib/containerd 2>/dev/null || find /var/lib/containerd -mindepth 1 -delete
systemctl daemon-reload
systemctl reset-failed >/dev/null 2>&1 || true
`

// clean removes what the provider delivered to the host and what the node
// made of it.
func (c *client) clean(ctx context.Context) error {
	_, err := c.run(ctx, "remove kubeplug's files", fmt.Sprintf(cleanScript, strings.Join(units, " "), "/usr/bin/kubelet /usr/bin/kube-proxy"), nil)
	return err
}
