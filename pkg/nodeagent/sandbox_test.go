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
	// /tmp is the hook's own, and its TMPDIR whatever the caller's was.
	t.Setenv("TMPDIR", t.TempDir())
	if out, err := run("f=$(mktemp) && echo t > $f && cat $f && case $f in /tmp/*) ;; *) echo not in /tmp: $f ;; esac"); err != nil || out != "t\n" {
		t.Errorf("mktemp in the sandbox: %q %v", out, err)
	}
	if out, err := run("echo t > /tmp/kubeplug-sandbox-tmp && cat /tmp/kubeplug-sandbox-tmp"); err != nil || out != "t\n" {
		t.Errorf("private /tmp: %q %v", out, err)
	}
	if _, err := os.Stat("/tmp/kubeplug-sandbox-tmp"); err == nil {
		_ = os.Remove("/tmp/kubeplug-sandbox-tmp")
		t.Error("the hook's /tmp is the host's")
	}
}
