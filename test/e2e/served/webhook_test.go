package served

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// The example's webhooks (examples/plugins/deployment-policy), each limited
// to the Deployments of this test by an object selector, with a short
// timeout, and a third, failing closed: failurePolicy Fail.
const webhookPluginYAML = `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: deployment-policy, version: 0.1.0}
spec:
  contributes:
    kubernetes:
      manifests: [manifests/]
      webhooks:
        - name: images.deployment-policy.kubeplug.dev
          type: validating
          service: {namespace: NS, name: deployment-policy, port: PORT}
          path: /validate
          rules: [{operations: [CREATE, UPDATE], apiGroups: [apps], apiVersions: [v1], resources: [deployments]}]
          objectSelector: {matchLabels: {e2e.kubeplug.dev/policy: NS}}
          timeoutSeconds: 2
        - name: requests.deployment-policy.kubeplug.dev
          type: mutating
          service: {namespace: NS, name: deployment-policy, port: PORT}
          path: /mutate
          rules: [{operations: [CREATE, UPDATE], apiGroups: [apps], apiVersions: [v1], resources: [deployments]}]
          objectSelector: {matchLabels: {e2e.kubeplug.dev/policy: NS}}
          timeoutSeconds: 2
        - name: strict.deployment-policy.kubeplug.dev
          type: validating
          service: {namespace: NS, name: deployment-policy, port: PORT}
          path: /validate
          rules: [{operations: [CREATE, UPDATE], apiGroups: [apps], apiVersions: [v1], resources: [deployments]}]
          objectSelector: {matchLabels: {e2e.kubeplug.dev/strict: NS}}
          failurePolicy: Fail
          timeoutSeconds: 2
`

// The Service reaches the example's server, run by this test on loopback.
const webhookManifestsYAML = `apiVersion: v1
kind: Service
metadata: {name: deployment-policy, namespace: NS}
spec:
  type: ExternalName
  externalName: localhost
  ports: [{port: PORT, name: https}]
`

// TestWebhook runs the example deployment-policy webhook server (its own
// binary, on sdk/webhook) behind the webhook configurations and serving
// certificate kubeplug generates, and applies Deployments with the
// kube-apiserver's kubectl: admitted, denied naming the field, mutated; the
// certificate rotated without a restart; then the server killed, hung and
// answering garbage, where each webhook's failurePolicy decides and the
// cluster keeps serving every other write.
func TestWebhook(t *testing.T) {
	e := newPluginEnv(t, "deployment-policy", webhookPluginYAML, webhookManifestsYAML)
	target := testcluster.Namespace(t) // the webhook's own namespace is left out by default
	bin := filepath.Join(t.TempDir(), "deployment-policy")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/kubeplug/kubeplug/examples/plugins/deployment-policy/server").CombinedOutput(); err != nil {
		t.Fatalf("build the example server: %v\n%s", err, out)
	}
	kill := startWebhook(t, bin, e.port, e.certDir)
	defer kill()
	e.waitApplied()

	n := 0
	// apply applies a Deployment in ns labelled for the webhooks in labels
	// ("policy", "strict"), with image and, unless "", a container's CPU
	// request; it returns kubectl's output.
	apply := func(ns, name, labels, image, cpu string) (string, error) {
		t.Helper()
		n++
		l := "app: " + name
		for w := range strings.FieldsSeq(labels) {
			l += ", e2e.kubeplug.dev/" + w + ": " + e.ns
		}
		res := ""
		if cpu != "" {
			res = ", resources: {requests: {cpu: " + cpu + "}}"
		}
		return e.kubectl("apply", "-f", e.file(fmt.Sprintf("deploy-%d.yaml", n), fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %s, namespace: %s, labels: {%s}}
spec:
  replicas: 0
  selector: {matchLabels: {app: %s}}
  template:
    metadata: {labels: {app: %s}}
    spec: {containers: [{name: c, image: "%s"%s}]}
`, name, ns, l, name, name, image, res)))
	}
	requests := func(ns, name string) string {
		t.Helper()
		out, err := e.kubectl("get", "deployment", name, "-n", ns, "-o", "jsonpath={.spec.template.spec.containers[0].resources.requests}")
		if err != nil {
			t.Fatalf("get deployment %s/%s: %v\n%s", ns, name, err, out)
		}
		return out
	}
	const denied = `denied the request: spec.template.spec.containers[0].image: Invalid value: "nginx:latest": must name a version: a tag other than latest, or a digest`

	// Admitted as it is; mutated (the missing requests defaulted); denied
	// naming the field, by the example's handlers through kubectl apply.
	if out, err := apply(target, "admitted", "policy", "nginx:1.27", "250m"); err != nil {
		t.Fatalf("a Deployment the policy admits: %v\n%s", err, out)
	}
	if got := requests(target, "admitted"); got != `{"cpu":"250m"}` {
		t.Errorf("an admitted Deployment's requests changed: %s", got)
	}
	if out, err := apply(target, "defaulted", "policy", "nginx:1.27", ""); err != nil {
		t.Fatalf("a Deployment the policy mutates: %v\n%s", err, out)
	}
	if got := requests(target, "defaulted"); got != `{"cpu":"100m","memory":"64Mi"}` {
		t.Errorf("the mutating webhook did not default the requests: %q", got)
	}
	out, err := apply(target, "latest", "policy", "nginx:latest", "")
	if err == nil || !strings.Contains(out, `admission webhook "images.deployment-policy.kubeplug.dev" `+denied) {
		t.Fatalf("a Deployment of nginx:latest was not denied naming the field: %v\n%s", err, out)
	}
	if _, err := e.kubectl("get", "deployment", "latest", "-n", target); err == nil {
		t.Error("the denied Deployment exists")
	}
	// The webhook's own namespace is not matched: its Pods can always be recreated.
	if out, err := apply(e.ns, "own", "policy", "nginx:latest", ""); err != nil {
		t.Errorf("a Deployment in the webhook's own namespace went to the webhook: %v\n%s", err, out)
	}

	// Rotation: a new CA and certificate (their Secrets deleted, kubeplug
	// apply issues new ones and a caBundle of the new CA alone). The failing
	// closed webhook refuses while the server presents the old certificate,
	// and admits once the new files are written — no restart.
	old, err := os.ReadFile(filepath.Join(e.certDir, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := e.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(e.ns)
	for _, s := range []string{"deployment-policy-serving-ca", "deployment-policy-serving-cert"} {
		if err := secrets.Delete(t.Context(), s, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if out, code := e.kubeplug(t.Context(), "apply", "-f", e.cluster("deployment-policy"), "--timeout", "2m"); code != 0 {
		t.Fatalf("apply to reissue the certificates (exit %d):\n%s", code, out)
	}
	eventually(t, 30*time.Second, func() error {
		out, err := apply(target, fmt.Sprintf("rotating-%d", n), "strict", "nginx:1.27", "")
		if err == nil || !strings.Contains(out, "x509") {
			return fmt.Errorf("with a new caBundle, the old certificate served was not refused: %w\n%s", err, out)
		}
		return nil
	})
	e.waitCert(string(old))
	eventually(t, 30*time.Second, func() error {
		out, err := apply(target, fmt.Sprintf("rotated-%d", n), "strict", "nginx:1.27", "")
		if err != nil {
			return fmt.Errorf("the new certificate written, the server still does not present it: %w\n%s", err, out)
		}
		return nil
	})
	if out, err := apply(target, "strict-latest", "strict", "nginx:latest", ""); err == nil || !strings.Contains(out, `admission webhook "strict.deployment-policy.kubeplug.dev" `+denied) {
		t.Fatalf("after rotation, a Deployment of nginx:latest was not denied: %v\n%s", err, out)
	}

	// faults checks, with the webhook not answering as it should, that the
	// webhooks with failurePolicy Ignore let a Deployment through unchanged
	// within their timeout, the one with Fail refuses it, and other writes
	// are served.
	faults := func(what string) {
		t.Helper()
		start := time.Now()
		name := strings.ReplaceAll(what, " ", "-")
		if out, err := apply(target, name+"-ignored", "policy", "nginx:latest", ""); err != nil {
			t.Errorf("%s: failurePolicy Ignore did not let the Deployment through: %v\n%s", what, err, out)
		} else if got := requests(target, name+"-ignored"); got != "" {
			t.Errorf("%s: a Deployment let through has requests %s", what, got)
		}
		if out, err := apply(target, name+"-strict", "strict", "nginx:1.27", ""); err == nil || !strings.Contains(out, `failed calling webhook "strict.deployment-policy.kubeplug.dev"`) {
			t.Errorf("%s: failurePolicy Fail did not refuse the Deployment: %v\n%s", what, err, out)
		}
		if out, err := apply(target, name+"-other", "", "nginx:latest", ""); err != nil {
			t.Errorf("%s: a Deployment no webhook selects: %v\n%s", what, err, out)
		}
		if out, err := e.kubectl("create", "configmap", name+"-other", "-n", target); err != nil {
			t.Errorf("%s: a ConfigMap: %v\n%s", what, err, out)
		}
		// Three webhook calls at most, each within its 2 s timeout, not the
		// API server's 30 s.
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s: the writes took %s", what, d)
		}
		t.Logf("%s: writes took %s", what, time.Since(start).Round(time.Millisecond))
	}

	kill()
	faults("killed")

	ln, err := net.Listen("tcp", "127.0.0.1:"+e.port)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	faults("hung")
	_ = ln.Close()
	mu.Lock()
	for _, c := range held {
		_ = c.Close()
	}
	mu.Unlock()

	cert, err := tls.LoadX509KeyPair(filepath.Join(e.certDir, "tls.crt"), filepath.Join(e.certDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err = tls.Listen("tcp", "127.0.0.1:"+e.port, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	garbage := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("<html>not a review</html>"))
	})}
	go func() { _ = garbage.Serve(ln) }()
	defer garbage.Close()
	faults("garbage")
}

// startWebhook runs the example server on the port with the certificate of
// certDir and waits for it to answer; kill ends it (SIGKILL, as a Pod
// killed) and may be called again.
func startWebhook(t *testing.T, bin, port, certDir string) (kill func()) {
	t.Helper()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--addr", "127.0.0.1:"+port, "--cert-dir", certDir)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("webhook server's log:\n%s", logs.String())
			}
		})
	}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a readiness probe, as the kubelet's
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get("https://127.0.0.1:" + port + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return kill
			}
		}
		if time.Now().After(deadline) {
			kill()
			t.Fatalf("the webhook server did not answer /readyz within 30s: %v\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
