package faults

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/internal/faultpoint"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/lease"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// manyObjects is how many ConfigMaps the restart test's second wave applies.
const manyObjects = 1500

const restartCluster = `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: restart}
spec:
  kubernetesVersion: 1.37.1
  provider: {local: {}}
  plugins:
    sources: [{dir: ./plugins}]
    enabled: [{name: first}, {name: many}]
`

var restartPlugins = map[string]string{
	"first/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: first, version: 1.0.0}
spec:
  contributes:
    kubernetes: {manifests: [manifests/]}
`,
	"first/manifests/ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: restart}\n",
	"many/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: many, version: 1.0.0}
spec:
  requires: [{name: first}]
  contributes:
    kubernetes: {manifests: [manifests/]}
`,
	"many/manifests/cms.yaml": fmt.Sprintf(`{{- range $i := until %d }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm-{{ $i }}, namespace: restart}
data: {i: "{{ $i }}"}
{{- end }}
`, manyObjects),
}

// TestAPIServerRestartMidApply restarts the API server of a private control
// plane as soon as an apply starts its wave of many objects. The run must either
// complete (its requests retried) or fail with a clear error; either way the next
// run converges: every object applied, the plugins recorded Ready, the lease free.
func TestAPIServerRestartMidApply(t *testing.T) {
	cp := testcluster.Start(t, controlplane.Options{}, -1)
	kubeconfig := cp.KubeconfigPath()
	dir := t.TempDir()
	files := map[string]string{"cluster.yaml": restartCluster}
	for p, c := range restartPlugins {
		files[filepath.Join("plugins", p)] = c
	}
	for p, c := range files {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "cluster.yaml")

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubeplugBin, "apply", "-f", file, "--no-builtin", "--timeout", "2m", "--lock-timeout", "1m")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, faultpoint.EnvVar+"=") || strings.HasPrefix(kv, "KUBECONFIG=")
	}), "KUBECONFIG="+kubeconfig)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Restart the API server when the wave of many objects starts.
	var restartErr error
	var wg sync.WaitGroup
	restarted := false
	sc := bufio.NewScanner(stderr)
	var errOut strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "memcache.go") {
			continue // client-go's discovery cache complains of every refused connection
		}
		errOut.WriteString(line + "\n")
		if !restarted && strings.HasPrefix(line, "wave 1:") {
			restarted = true
			wg.Go(func() { restartErr = cp.Restart(ctx, controlplane.APIServer) })
		}
	}
	runErr := cmd.Wait()
	wg.Wait()
	if !restarted {
		t.Fatalf("the apply never started wave 1: %v\n%s%s", runErr, out.String(), errOut.String())
	}
	if restartErr != nil {
		t.Fatalf("restart the API server: %v", restartErr)
	}
	if runErr == nil {
		t.Logf("the apply completed across the API server restart:\n%s", out.String())
	} else {
		// A failure must say what failed, never panic or hang.
		msg := errOut.String()
		if strings.Contains(msg, "panic:") || !strings.Contains(msg, "many") && !strings.Contains(msg, "API server") {
			t.Errorf("the apply failed without a clear error: %v\n%s", runErr, msg)
		}
		t.Logf("the apply failed across the API server restart: %v\n%s", runErr, msg)
	}

	r := kubeplug(t, kubeconfig, "", "apply", "-f", file, "--no-builtin", "--timeout", "2m", "--lock-timeout", "1m")
	if r.err != nil {
		t.Fatalf("the run after the restart: %s", r)
	}
	if !strings.Contains(r.output, "2 plugin(s)") {
		t.Errorf("the run after the restart: %s", r)
	}
	client := testcluster.NewClient(t, cp.RESTConfig())
	cms, err := client.CoreV1().ConfigMaps("restart").List(t.Context(), metav1.ListOptions{LabelSelector: deploy.LabelPlugin + "=many"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != manyObjects {
		t.Errorf("%d ConfigMaps of many exist, want %d", len(cms.Items), manyObjects)
	}
	d, err := deploy.New(cp.RESTConfig(), deploy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := d.Inventories(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.Phase != deploy.PhaseReady {
			t.Errorf("plugin %s is %s: %s", rec.Plugin, rec.Phase, rec.Message)
		}
		if rec.Plugin == "many" && len(rec.Objects) != manyObjects {
			t.Errorf("the record of many lists %d objects, want %d", len(rec.Objects), manyObjects)
		}
	}
	held, err := client.CoordinationV1().Leases("kubeplug-system").Get(t.Context(), lease.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := held.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the lease is still held by %s", *h)
	}
}
