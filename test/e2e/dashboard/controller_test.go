package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestControllerServesDashboard runs kubeplug controller --dashboard: the
// dashboard's pages are served under /dashboard/ on the metrics address,
// beside /metrics, read-only — no rollback link, the rollback page refused,
// the fleet shown without its actions —
// and answer whatever host they are addressed to (a Service's name).
func TestControllerServesDashboard(t *testing.T) {
	installCRDs(t)
	addr := freeAddr(t)
	kubeconfig := testcluster.ControlPlane(t).KubeconfigPath()
	cmd := exec.Command(os.Args[0], "controller", "--dashboard", "--kubeconfig", kubeconfig, "--metrics-bind-address", addr, "--health-probe-bind-address", "0") //nolint:gosec // this test binary as kubeplug
	cmd.Env = append(os.Environ(), runCLI+"=1")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	base := "http://" + addr
	get := func(path, host string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, _ := get("/dashboard/", "")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller's dashboard did not answer within 2m (last status %d)", code)
		}
		time.Sleep(250 * time.Millisecond)
	}
	code, body := get("/dashboard/", "kubeplug-controller.kubeplug-system.svc:8080")
	if code != http.StatusOK || !strings.Contains(body, `<base href="/dashboard/">`) || !strings.Contains(body, "(read-only)") || !strings.Contains(body, `<h2 id="plugins-h">Plugins</h2>`) {
		t.Errorf("GET /dashboard/ as the Service: %d\n%s", code, body)
	}
	if strings.Contains(body, "rollback") {
		t.Errorf("the read-only page offers a rollback:\n%s", body)
	}
	if code, body := get("/dashboard/plugins/hello/rollback?revision=1", ""); code != http.StatusForbidden || !strings.Contains(body, "read-only") {
		t.Errorf("the rollback page of the read-only dashboard: %d %s", code, body)
	}
	// The fleet, read-only too: shown, no action offered, the actions refused.
	if code, body := get("/dashboard/fleet", ""); code != http.StatusOK || !strings.Contains(body, `id="installations-h"`) || strings.Contains(body, "Suspend…") || strings.Contains(body, "Retry…") {
		t.Errorf("GET /dashboard/fleet on the read-only dashboard: %d\n%s", code, body)
	}
	if code, body := get("/dashboard/fleet/default/web/suspend", ""); code != http.StatusForbidden || !strings.Contains(body, "read-only") {
		t.Errorf("a fleet action on the read-only dashboard: %d %s", code, body)
	}
	if code, body := get("/dashboard/static/htmx.min.js", ""); code != http.StatusOK || !strings.Contains(body, "htmx") {
		t.Errorf("static files under /dashboard/: %d", code)
	}
	if code, body := get("/metrics", ""); code != http.StatusOK || !strings.Contains(body, "# HELP") {
		t.Errorf("/metrics beside the dashboard: %d", code)
	}
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs applies the controller's CRDs to the shared cluster and waits
// until they are established, as the controller's own tests do.
func installCRDs(t *testing.T) {
	t.Helper()
	dc := dynamic.NewForConfigOrDie(testcluster.RESTConfig(t))
	force := true
	for _, raw := range v1alpha1.CRDs() {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(u.Object)
		if _, err := dc.Resource(crdGVR).Patch(t.Context(), u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "dashboard-test", Force: &force}); err != nil {
			t.Fatalf("apply CRD %s: %v", u.GetName(), err)
		}
		established := func(ctx context.Context) (bool, error) {
			got, err := dc.Resource(crdGVR).Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok, err := established(t.Context())
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not established within 30s (%v)", u.GetName(), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
