package dashboard

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/state"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestStatusWatch runs `kubeplug status --watch` as a user does, its output
// piped (not a terminal): it prints the table, then, when a release record
// changes (here one written directly, as an apply in another process would),
// a "--- TIME" line and the table again with the change; Ctrl-C stops it
// cleanly.
//
// With -o json, each change is one more JSON document (no "---" line).
func TestStatusWatch(t *testing.T) {
	admin := testcluster.RESTConfig(t)
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "kubeplug-system"
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err == nil {
		t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	} else if !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	kc, err := kube.New(admin, kube.Options{Logger: testcluster.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	store := state.NewSecrets(kc, ns, 10)
	t.Run("text", func(t *testing.T) { statusWatch(t, store, false) })
	t.Run("json", func(t *testing.T) { statusWatch(t, store, true) })
}

func statusWatch(t *testing.T, store *state.Secrets, asJSON bool) {
	ctx := t.Context()
	kubeconfig := testcluster.ControlPlane(t).KubeconfigPath()
	plugin := fmt.Sprintf("watched-%d", time.Now().UnixNano()%100000)
	t.Cleanup(func() { _ = store.Delete(context.Background(), plugin) })

	args := []string{"status", "--watch", "--kubeconfig", kubeconfig}
	if asJSON {
		args = append(args, "-o", "json")
	}
	cmd := exec.Command(os.Args[0], args...) //nolint:gosec // this test binary as kubeplug
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
			t.Logf("kubeplug status --watch: %v", err) // killed: expected after a failure
		}
	})
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var seen []string
	next := func(d time.Duration) (string, bool) {
		select {
		case l, ok := <-lines:
			if ok {
				seen = append(seen, l)
			}
			return l, ok
		case <-time.After(d):
			return "", true
		}
	}
	// The first table.
	for deadline := time.Now().Add(time.Minute); ; {
		l, ok := next(time.Second)
		if !ok || time.Now().After(deadline) {
			t.Fatalf("no table from kubeplug status --watch; output:\n%s", strings.Join(seen, "\n"))
		}
		if !asJSON && strings.HasPrefix(l, "PLUGIN") || asJSON && (l == "]" || l == "[]") {
			break
		}
	}
	// A record appears; written again until the watch shows it (the watch
	// starts after the first table: a record written before it lists is
	// already there, no change).
	rev, redrawn, written := 0, false, time.Time{}
	for deadline := time.Now().Add(90 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatalf("the new plugin %s never appeared; output:\n%s", plugin, strings.Join(seen, "\n"))
		}
		if time.Since(written) > 5*time.Second {
			rev++
			written = time.Now()
			rec := &state.Record{Plugin: plugin, Revision: rev, Version: fmt.Sprintf("1.0.%d", rev), Phase: "Ready", Description: "install", Started: time.Now(), Finished: time.Now()}
			if err := store.Write(ctx, rec, nil); err != nil {
				t.Fatal(err)
			}
		}
		l, ok := next(time.Second)
		if !ok {
			t.Fatalf("kubeplug status --watch ended; output:\n%s", strings.Join(seen, "\n"))
		}
		if strings.HasPrefix(l, "--- ") || asJSON && strings.HasPrefix(l, "[") {
			redrawn = true
		}
		if asJSON && strings.Contains(l, `"plugin": "`+plugin+`"`) {
			if !redrawn {
				t.Errorf("the change is not in a new JSON document:\n%s", strings.Join(seen, "\n"))
			}
			if strings.Contains(strings.Join(seen, "\n"), "--- ") {
				t.Errorf("a --- line in JSON output:\n%s", strings.Join(seen, "\n"))
			}
			break
		}
		if !asJSON && strings.HasPrefix(l, plugin+" ") {
			if !redrawn {
				t.Errorf("the change was not announced by a --- line:\n%s", strings.Join(seen, "\n"))
			}
			if !strings.Contains(l, "Ready") || !strings.Contains(l, "0/0") {
				t.Errorf("the new plugin's row %q, want it Ready with 0/0 objects", l)
			}
			break
		}
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
		t.Error("kubeplug status --watch did not stop within 15s of Ctrl-C")
	}
}
