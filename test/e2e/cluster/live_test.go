package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/lease"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/test/harness/livetest"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

var liveFiles = map[string]string{
	"cluster.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: live}
spec:
  kubernetesVersion: 1.37.1
  provider: {local: {}}
  plugins:
    sources: [{dir: ./plugins}]
    enabled: [{name: stuck}]
`,
	"plugins/stuck/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: stuck, version: 0.1.0}
spec:
  contributes:
    kubernetes: {manifests: [manifests/]}
`,
	// No node matches the Deployment's selector: it never becomes ready.
	"plugins/stuck/manifests/objects.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: stuck, namespace: default}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: stuck, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: stuck}}
  template:
    metadata: {labels: {app: stuck}}
    spec:
      nodeSelector: {no-such-node: "true"}
      containers: [{name: c, image: registry.example/c:1}]
`,
}

// TestLiveApply runs kubeplug apply on a pseudo-terminal against a private
// control plane and checks what a person sees on it: the wait for a lease
// another run holds (naming it), then the plugin's line saying what its wait
// waits on, then its failure in full, and nothing left in progress at the end.
func TestLiveApply(t *testing.T) {
	cp := testcluster.Start(t, controlplane.Options{}, 0)
	dir := t.TempDir()
	for p, c := range liveFiles {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KUBECONFIG", cp.KubeconfigPath())
	t.Setenv("CI", "") // the terminal decides, even on CI
	t.Setenv("NO_COLOR", "1")
	t.Setenv("TERM", "xterm")
	t.Setenv("KUBEPLUG_PROGRESS", "")

	other, err := deploy.New(cp.RESTConfig(), deploy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, release, err := lease.Lock(t.Context(), other.Client(), lease.Options{Operation: "rollback", Identity: "elsewhere/42/abcdef"})
	if err != nil {
		t.Fatal(err)
	}

	term := livetest.NewTerminal(t, 200, 30)
	code := make(chan int, 1)
	go func() {
		code <- cmd.Main(context.Background(), []string{"apply", "-f", filepath.Join(dir, "cluster.yaml"), "--no-builtin", "--timeout", "6s", "--lock-timeout", "1m"},
			cmd.Streams{In: strings.NewReader(""), Out: term.TTY, Err: term.TTY})
	}()
	seen := func(want string) {
		t.Helper()
		if !term.WaitFor(want, 30*time.Second) {
			t.Fatalf("the terminal does not show %q:\n%s", want, term.Screen)
		}
	}
	seen("waiting for the cluster's operation lease: rollback by elsewhere/42 holds it (expires in ")
	if err := release(t.Context()); err != nil {
		t.Fatal(err)
	}
	seen("✓ took the cluster's operation lease after waiting ")
	seen("applied 2/2, ready 1/2, waiting on Deployment.apps/default/stuck (")
	var c int
	select {
	case c = <-code:
	case <-time.After(time.Minute):
		t.Fatalf("apply did not end:\n%s", term.Screen)
	}
	term.Drain()
	if c != 1 {
		t.Errorf("exit status %d, want 1", c)
	}
	screen := term.Screen.String()
	if !strings.Contains(screen, "✗ plugin stuck FAILED: not ready after 6s: Deployment.apps/default/stuck is") {
		t.Errorf("the failure is not shown in full:\n%s", screen)
	}
	for _, l := range term.Screen.Lines() {
		if strings.Contains(l, "waiting on") || strings.Contains(l, "waiting for the cluster's") {
			t.Errorf("a line in progress left on the terminal: %q\n%s", l, screen)
		}
	}
	t.Logf("the terminal at the end:\n%s", screen)
}
