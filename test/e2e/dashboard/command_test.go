package dashboard

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestDashboardCommand runs `kubeplug dashboard` as a user does: it prints
// its URL, serves the cluster page and the event stream there, and stops
// cleanly on Ctrl-C (SIGINT).
func TestDashboardCommand(t *testing.T) {
	kubeconfig := testcluster.ControlPlane(t).KubeconfigPath()
	cmd := exec.Command(os.Args[0], "dashboard", "--kubeconfig", kubeconfig) //nolint:gosec // this test binary as kubeplug
	cmd.Env = append(os.Environ(), runCLI+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if err := <-exited; err != nil {
			t.Logf("kubeplug dashboard: %v", err) // killed: expected after a failure
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the URL: %v", err)
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "dashboard: ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("kubeplug dashboard printed %q, want its loopback URL", line)
	}
	c := &http.Client{Timeout: time.Minute}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `<h2 id="plugins-h">Plugins</h2>`) || !strings.Contains(string(body), "Nodes") {
		t.Errorf("GET %s: %d\n%s", url, resp.StatusCode, body)
	}
	resp, err = c.Get(url + "events")
	if err != nil {
		t.Fatal(err)
	}
	first, _ := bufio.NewReader(resp.Body).ReadString('\n')
	_ = resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || !strings.HasPrefix(first, ":") {
		t.Errorf("events: %s, first line %q", ct, first)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Errorf("after Ctrl-C: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Error("kubeplug dashboard did not stop within 15s of Ctrl-C")
	}
}
