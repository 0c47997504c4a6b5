package nodeagent

import (
	"os"
	"os/exec"
)

// sandboxScript runs in the sandbox's fresh mount and pid namespaces (made by
// unshare) before the hook: it remounts every mount read-only except the
// machine root ($1) and what lies below it, gives the hook a private TMPDIR
// (a tmpfs on the machine's own /tmp) and a /proc of its own pid namespace
// (unshare --mount-proc), then execs the hook.
// A mount that cannot be made read-only is named on stderr, and the hook does
// not run: the sandbox would be incomplete.
const sandboxScript = `set -eu
root=$1; shift
mount --bind "$root" "$root"
failed=""
# Field 5 of mountinfo is the mount point with space, tab, newline and
# backslash octal-escaped: unescaped (a process) only where it has one, as
# most do not and a hook waits for this loop. A namespace handle (nsfs, such
# as /run/netns/NAME) holds no file to write, so read-only would add nothing;
# it is left out, as the handles other clusters on this host make and remove
# at any moment could fail the remount of one that is going away.
mounts=$(awk '{for (i = 7; i < NF; i++) if ($i == "-") break; if ($(i+1) != "nsfs") print $5}' /proc/self/mountinfo | sort -u)
while IFS= read -r m; do
	case "$m" in
	*\\*) m=$(printf '%s' "$m" | sed -e 's/\\040/ /g' -e 's/\\011/\t/g' -e 's/\\134/\\/g') ;;
	esac
	case "$m" in
	"$root" | "$root"/* | /proc | /proc/*) continue ;;
	esac
	# A mount gone since the list was read (another process's, unmounted in
	# the meantime) is not a gap in the sandbox.
	mount -o remount,bind,ro "$m" 2>/dev/null || ! mountpoint -q "$m" || failed="$failed $m"
done <<EOF
$mounts
EOF
if [ -n "$failed" ]; then
	echo "kubeplug sandbox: could not make read-only:$failed" >&2
	exit 125
fi
# The machine's own /tmp, below its root, is the hook's temporary directory:
# private (a tmpfs of this namespace) and gone with it. The host's /tmp stays
# visible (a host path a hook reads may be there) and read-only.
mkdir -p "$root/tmp"
mount -t tmpfs -o mode=1777,size=256m tmpfs "$root/tmp"
TMPDIR=$root/tmp
export TMPDIR
cd "$root"
exec "$@"
`

// SandboxArgv is the Sandbox prefix that runs a hook of a machine whose root
// is the directory root on this host (a simulated node of the local
// provider): util-linux's unshare makes a mount and a pid namespace of the
// hook's own (its processes end with it), in which every file system but
// root is read-only — a hook that writes outside its machine root (the
// host's /etc, /usr, /tmp) fails with "Read-only file system" instead of
// changing this machine — and TMPDIR is the machine's own /tmp, a private tmpfs. Paths under root stay where they are,
// so $KUBEPLUG_ROOT keeps its meaning. Needs root (CAP_SYS_ADMIN).
func SandboxArgv(root string) []string {
	return []string{"unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation", "private",
		"/bin/sh", "-c", sandboxScript, "kubeplug-sandbox", root}
}

// SandboxAvailable says whether SandboxArgv can work here: running as root,
// with unshare, mount, mountpoint and awk on PATH.
func SandboxAvailable() bool {
	if os.Geteuid() != 0 {
		return false
	}
	for _, p := range []string{"unshare", "mount", "mountpoint", "awk"} {
		if _, err := exec.LookPath(p); err != nil {
			return false
		}
	}
	return true
}
