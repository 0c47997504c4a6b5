package nodeagent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSandboxKeepsTheHostReadOnly: in the sandbox a hook writes its machine
// root, but not the host's /etc or /var, and sees its own pid namespace.
func TestSandboxKeepsTheHostReadOnly(t *testing.T) {
	if !SandboxAvailable() {
		t.Fatal("the sandbox needs root, unshare, mount and awk (util-linux, as on every machine this project runs on)")
	}
	root := t.TempDir()
	hostFile := filepath.Join("/var/tmp", "kubeplug-sandbox-test-"+filepath.Base(root))
	t.Cleanup(func() { _ = os.Remove(hostFile) })
	run := func(script string) (string, error) {
		argv := append(SandboxArgv(root), "/bin/sh", "-c", script)
		out, err := exec.CommandContext(context.Background(), argv[0], argv[1:]...).CombinedOutput()
		return string(out), err
	}
	if out, err := run(`mkdir -p etc && echo inside > etc/greeting && echo $$ && ls /proc | grep -c '^[0-9]'`); err != nil {
		t.Fatalf("a write under the machine root failed: %v\n%s", err, out)
	} else if f := strings.Fields(out); len(f) != 2 || f[0] != "1" && f[0] != "2" {
		t.Errorf("the hook's pid and process count = %q, want a pid namespace of its own", out)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc", "greeting")); err != nil || string(b) != "inside\n" {
		t.Errorf("the machine root's file = %q, %v", b, err)
	}
	out, err := run("echo x > " + hostFile)
	if err == nil || !strings.Contains(out, "Read-only file system") {
		t.Errorf("a write to the host's /var/tmp: err %v, output %q; want Read-only file system", err, out)
	}
	if _, err := os.Stat(hostFile); err == nil {
		t.Errorf("the hook wrote %s on the host", hostFile)
	}
	out, err = run("touch /etc/kubeplug-sandbox-test")
	if err == nil || !strings.Contains(out, "Read-only file system") {
		t.Errorf("a write to the host's /etc: err %v, output %q", err, out)
	}
	// TMPDIR is the machine's own /tmp, private; the host's /tmp is visible
	// (a host path a hook reads may be there) and read-only.
	t.Setenv("TMPDIR", t.TempDir())
	out, err = run("f=$(mktemp) && echo t > $f && cat $f && echo $f")
	if err != nil || !strings.HasPrefix(out, "t\n"+filepath.Join(root, "tmp")+"/") {
		t.Errorf("mktemp in the sandbox: %q %v, want a file under %s/tmp", out, err, root)
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "tmp")); len(entries) != 0 {
		t.Errorf("the hook's temporary files outlive it in the machine's /tmp: %v", entries)
	}
	hostTmp := filepath.Join(os.TempDir(), "kubeplug-sandbox-visible-"+filepath.Base(root))
	if err := os.WriteFile(hostTmp, []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(hostTmp) })
	if out, err := run("cat " + hostTmp); err != nil || out != "from the host\n" {
		t.Errorf("a host file under /tmp in the sandbox: %q %v", out, err)
	}
	if out, err := run("echo x > /tmp/kubeplug-sandbox-tmp"); err == nil || !strings.Contains(out, "Read-only file system") {
		_ = os.Remove("/tmp/kubeplug-sandbox-tmp")
		t.Errorf("a write to the host's /tmp: err %v, output %q", err, out)
	}
}

// TestSandboxMakesAMountWithASpaceReadOnly: a mount point whose name
// mountinfo escapes (a space is \040) is made read-only too.
func TestSandboxMakesAMountWithASpaceReadOnly(t *testing.T) {
	if !SandboxAvailable() {
		t.Fatal("the sandbox needs root, unshare, mount and awk (util-linux, as on every machine this project runs on)")
	}
	root := t.TempDir()
	dir := filepath.Join("/var/tmp", "kubeplug sandbox "+filepath.Base(root))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// A tmpfs at dir in a mount namespace of the test's own (the host's
	// mounts stay as they are), in which the sandbox runs a hook writing there.
	argv := append([]string{"unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
		`mount -t tmpfs tmpfs "$0" && exec "$@"`, dir}, SandboxArgv(root)...)
	argv = append(argv, "/bin/sh", "-c", `echo x > "$0/f"`, dir)
	out, err := exec.CommandContext(context.Background(), argv[0], argv[1:]...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Read-only file system") {
		t.Errorf("a write to the mount %q: err %v, output %q; want Read-only file system", dir, err, out)
	}
}

// TestSandboxLeavesNamespaceHandlesAlone: a namespace handle (an nsfs mount,
// as /run/netns/NAME of another cluster on this host) is not remounted — it
// holds no file to write, and one going away while the sandbox starts must not
// stop the hook — while every other mount still is.
func TestSandboxLeavesNamespaceHandlesAlone(t *testing.T) {
	if !SandboxAvailable() {
		t.Fatal("the sandbox needs root, unshare, mount, mountpoint and awk (util-linux, as on every machine this project runs on)")
	}
	root := t.TempDir()
	handle := filepath.Join(t.TempDir(), "net")
	if err := os.WriteFile(handle, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The handle is bound in a mount namespace of the test's own, in which
	// the sandbox runs a hook that prints the handle's and /usr's mount options.
	argv := append([]string{"unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
		`mount --bind /proc/self/ns/net "$0" && exec "$@"`, handle}, SandboxArgv(root)...)
	argv = append(argv, "/bin/sh", "-c", `awk -v h="$0" '$5 == h || $5 == "/" {print $5, $6}' /proc/self/mountinfo`, handle)
	out, err := exec.CommandContext(context.Background(), argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("the hook did not run: %v: %s", err, out)
	}
	if !strings.Contains(string(out), handle+" rw") {
		t.Errorf("the namespace handle %s in the sandbox: %q, want it left rw (not remounted)", handle, out)
	}
	if !strings.Contains(string(out), "/ ro") {
		t.Errorf("the host's / in the sandbox: %q, want ro", out)
	}
}
