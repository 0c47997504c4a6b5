package served

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"

	"github.com/kubeplug/kubeplug/internal/cli"
	"github.com/kubeplug/kubeplug/internal/portblock"
	"github.com/kubeplug/kubeplug/internal/testcluster"
	"github.com/kubeplug/kubeplug/sdk/apiserver"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Run(m)) }

const pluginYAML = `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: widgets-api, version: 0.1.0}
spec:
  contributes:
    kubernetes:
      manifests: [manifests/]
      apis:
        - group: GROUP
          versions: [v1alpha1]
          service: {namespace: NS, name: widgets-api, port: PORT}
`

// The Service reaches this test process: an ExternalName on loopback, which the
// aggregator resolves like any Service (with the Service's DNS name as TLS
// server name, so the serving certificate is checked as in a real cluster).
const manifestsYAML = `apiVersion: v1
kind: ServiceAccount
metadata: {name: widgets-api, namespace: NS}
---
apiVersion: v1
kind: Service
metadata: {name: widgets-api, namespace: NS}
spec:
  type: ExternalName
  externalName: localhost
  ports: [{port: PORT, name: https}]
`

const otherYAML = `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: other, version: 0.1.0}
spec:
  contributes:
    kubernetes:
      manifests: [cm.yaml]
`

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestServedAPI(t *testing.T) {
	ns := testcluster.Namespace(t)
	group := strings.ReplaceAll(ns, "-", "") + ".example.com"
	kubeconfig := testcluster.ControlPlane(t).KubeconfigPath()
	// The server stops and starts again on the same port below: a port of a
	// block of its own (internal/portblock, outside the kernel's ephemeral
	// range) stays free meanwhile, where one the kernel chose for port 0 was
	// taken by another process once (bind: address already in use).
	owner := t.TempDir()
	blk, err := portblock.Acquire(owner, nil, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(blk.Release)
	p := blk.Ports()[0]
	blk.Hand(p)
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(p)
	subst := strings.NewReplacer("GROUP", group, "NS", ns, "PORT", port)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "plugins/widgets-api/plugin.yaml"), subst.Replace(pluginYAML))
	write(t, filepath.Join(dir, "plugins/widgets-api/manifests/server.yaml"), subst.Replace(manifestsYAML))
	write(t, filepath.Join(dir, "plugins/other/plugin.yaml"), otherYAML)
	write(t, filepath.Join(dir, "plugins/other/cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: "+ns+"}\ndata: {a: b}\n")
	cluster := func(plugins ...string) string {
		f := filepath.Join(dir, "cluster-"+strings.Join(plugins, "-")+".yaml")
		body := "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: served}\nspec:\n  kubernetesVersion: 1.37.1\n  plugins:\n    sources: [{dir: ./plugins}]\n    enabled:\n"
		for _, p := range plugins {
			body += "      - name: " + p + "\n"
		}
		write(t, f, body)
		return f
	}
	kubeplug := func(ctx context.Context, args ...string) (string, int) {
		var out bytes.Buffer
		args = append(args, "--kubeconfig", kubeconfig, "--no-progress")
		code := cli.Main(ctx, args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &out})
		return out.String(), code
	}
	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(testcluster.ControlPlane(t).BinDir(), "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	dyn, err := dynamic.NewForConfig(testcluster.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		out, code := kubeplug(context.WithoutCancel(t.Context()), "uninstall", "widgets-api", "other")
		if code != 0 {
			t.Logf("cleanup: %s", out)
		}
	})

	// Apply in the background: the plugin is ready only once its API is
	// Available, which needs the server this test starts once its certificate
	// exists.
	applied := make(chan string, 1)
	go func() {
		out, code := kubeplug(t.Context(), "apply", "-f", cluster("widgets-api"), "--timeout", "2m")
		applied <- fmt.Sprintf("exit %d\n%s", code, out)
	}()
	certDir := t.TempDir()
	secretGVR := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := dyn.Resource(secretGVR).Namespace(ns).Get(t.Context(), "widgets-api-serving-cert", metav1.GetOptions{})
		if err == nil {
			crt, _, _ := unstructured.NestedString(s.Object, "data", "tls.crt")
			key, _, _ := unstructured.NestedString(s.Object, "data", "tls.key")
			if crt != "" && key != "" {
				for name, v := range map[string]string{"tls.crt": crt, "tls.key": key} {
					b, _ := base64.StdEncoding.DecodeString(v)
					write(t, filepath.Join(certDir, name), string(b))
				}
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no serving certificate Secret after a minute: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	serve := func(ln net.Listener) (stop func()) {
		ctx, cancel := context.WithCancel(t.Context())
		srv, err := apiserver.New(ctx, apiserver.Options{
			Group: group, Version: "v1alpha1",
			Resources: []apiserver.Resource{{Kind: "Widget", Plural: "widgets", Namespaced: true}},
			Client:    testcluster.Client(t), Storage: ns,
			CertFile: filepath.Join(certDir, "tls.crt"), KeyFile: filepath.Join(certDir, "tls.key"),
			Validate: func(_ context.Context, w *unstructured.Unstructured) error {
				if v, ok, _ := unstructured.NestedFieldNoCopy(w.Object, "spec", "size"); ok && v.(float64) < 1 {
					return field.Invalid(field.NewPath("spec", "size"), v, "must be at least 1")
				}
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx, ln) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("server: %v", err)
			}
		}
	}
	stop := serve(ln)
	select {
	case out := <-applied:
		if !strings.HasPrefix(out, "exit 0") {
			t.Fatalf("apply: %s", out)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("apply did not finish")
	}

	// The API answers through the kube-apiserver: discovery, create, get, list.
	widget := filepath.Join(dir, "widget.yaml")
	write(t, widget, "apiVersion: "+group+"/v1alpha1\nkind: Widget\nmetadata: {name: w1, namespace: "+ns+"}\nspec: {size: 3}\n")
	if out, err := kubectl("create", "-f", widget, "--validate=false"); err != nil {
		t.Fatalf("kubectl create: %v\n%s", err, out)
	}
	write(t, filepath.Join(dir, "bad.yaml"), "apiVersion: "+group+"/v1alpha1\nkind: Widget\nmetadata: {name: bad, namespace: "+ns+"}\nspec: {size: 0}\n")
	if out, err := kubectl("create", "-f", filepath.Join(dir, "bad.yaml"), "--validate=false"); err == nil || !strings.Contains(out, "spec.size: Invalid value: 0: must be at least 1") {
		t.Fatalf("an invalid widget was not refused naming the field: %v\n%s", err, out)
	}
	if out, err := kubectl("get", "widgets."+group, "-n", ns, "-o", "jsonpath={.items[*].spec.size}"); err != nil || out != "3" {
		t.Fatalf("kubectl get widgets: %v\n%q", err, out)
	}
	if out, err := kubectl("patch", "widgets."+group, "w1", "-n", ns, "--type=merge", "-p", `{"spec":{"size":4}}`); err != nil {
		t.Fatalf("kubectl patch: %v\n%s", err, out)
	}
	// A watch through the kube-apiserver sees a widget created after it started.
	widgets := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "widgets"}).Namespace(ns)
	list, err := widgets.List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list widgets through the API server: %v %v", err, list)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer wcancel()
	watcher, err := widgets.Watch(wctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatalf("watch widgets through the API server: %v", err)
	}
	write(t, filepath.Join(dir, "w2.yaml"), "apiVersion: "+group+"/v1alpha1\nkind: Widget\nmetadata: {name: w2, namespace: "+ns+"}\nspec: {size: 5}\n")
	if out, err := kubectl("create", "-f", filepath.Join(dir, "w2.yaml"), "--validate=false"); err != nil {
		t.Fatalf("kubectl create w2: %v\n%s", err, out)
	}
	for e := range watcher.ResultChan() {
		if u, ok := e.Object.(*unstructured.Unstructured); ok && e.Type == "ADDED" && u.GetName() == "w2" {
			break
		}
	}
	watcher.Stop()
	if wctx.Err() != nil {
		t.Fatal("the watch did not see w2 added within 30s")
	}
	if out, err := kubectl("delete", "widgets."+group, "w2", "-n", ns); err != nil {
		t.Fatalf("kubectl delete w2: %v\n%s", err, out)
	}

	// Stored by the cluster's API server: a ConfigMap in the storage namespace.
	if out, err := kubectl("get", "configmaps", "-n", ns, "-l", "apiserver.sdk.kubeplug.dev/resource=widgets."+group, "-o", "name"); err != nil || strings.Count(out, "configmap/") != 1 {
		t.Fatalf("delegated storage: %v\n%s", err, out)
	}
	// Authorization is the cluster's: a ServiceAccount with no RBAC is refused.
	if out, err := kubectl("get", "widgets."+group, "-n", ns, "--as=system:serviceaccount:"+ns+":nobody"); err == nil || !strings.Contains(out, "forbidden") {
		t.Fatalf("an unauthorized user listed widgets: %v\n%s", err, out)
	}

	// Killed: Available=False within the aggregator's check interval, and
	// nothing else stops working.
	stop()
	apiGVR := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	var start time.Time
	waitUnavailable := func() {
		t.Helper()
		start = time.Now()
		for {
			a, err := dyn.Resource(apiGVR).Get(t.Context(), "v1alpha1."+group, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !available(a) {
				t.Logf("APIService Available=False %s after the server stopped answering", time.Since(start).Round(time.Second))
				return
			}
			if time.Since(start) > 90*time.Second {
				t.Fatal("APIService still Available 90s after its server stopped answering")
			}
			time.Sleep(time.Second)
		}
	}
	waitUnavailable()
	if out, err := kubectl("get", "pods", "-A"); err != nil {
		t.Fatalf("kubectl get pods -A with a dead aggregated API: %v\n%s", err, out)
	}
	out, code := kubeplug(t.Context(), "status")
	if code != 0 || !regexpLine(out, "widgets-api", "Degraded", "not Available") {
		t.Fatalf("status with a dead aggregated API (exit %d) does not show the plugin Degraded:\n%s", code, out)
	}
	// Another plugin still applies; the run fails only on the dead one.
	out, code = kubeplug(t.Context(), "apply", "-f", cluster("widgets-api", "other"), "--timeout", "10s")
	if _, err := kubectl("get", "configmap", "other", "-n", ns); err != nil {
		t.Fatalf("apply of another plugin next to a dead aggregated API did not install it (exit %d):\n%s", code, out)
	}
	if code == 0 || !strings.Contains(out, "is not Available") || !strings.Contains(out, "API discovery is incomplete, going on without "+group+"/v1alpha1") {
		t.Fatalf("apply with a dead aggregated API did not say so (exit %d):\n%s", code, out)
	}
	if out, code := kubeplug(t.Context(), "uninstall", "other"); code != 0 {
		t.Fatalf("uninstall of another plugin with a dead aggregated API (exit %d):\n%s", code, out)
	}
	if out, code := kubeplug(t.Context(), "diff", "-f", cluster("widgets-api", "other"), "--live"); code > 1 {
		t.Fatalf("diff --live with a dead aggregated API (exit %d):\n%s", code, out)
	}

	// Restarted: Available again, and the plugin Ready.
	ln2, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	stop = serve(ln2)
	out, code = kubeplug(t.Context(), "apply", "-f", cluster("widgets-api", "other"), "--timeout", "2m")
	if code != 0 {
		t.Fatalf("apply after the server came back: %s", out)
	}
	if out, err := kubectl("get", "widgets."+group, "w1", "-n", ns, "-o", "jsonpath={.spec.size}"); err != nil || out != "4" {
		t.Fatalf("widget after restart: %v %q", err, out)
	}

	// Hung: the server accepts connections and never answers. The API server
	// gives up on it within its own timeouts; kubectl and kubeplug do not hang.
	stop()
	hung, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		_ = hung.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	}()
	waitUnavailable()
	start = time.Now()
	if out, err := kubectl("get", "pods", "-A"); err != nil || time.Since(start) > 30*time.Second {
		t.Fatalf("kubectl get pods -A with a hung aggregated API: %v after %s\n%s", err, time.Since(start), out)
	}
	sctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if out, code := kubeplug(sctx, "status"); code != 0 || !regexpLine(out, "widgets-api", "Degraded") {
		t.Fatalf("status with a hung aggregated API (exit %d, %s):\n%s", code, time.Since(start), out)
	}
	t.Logf("kubectl get pods -A and kubeplug status with a hung aggregated API: %s", time.Since(start).Round(time.Millisecond))

	// Uninstall removes the APIService before the rest: no stale discovery.
	if out, code := kubeplug(t.Context(), "uninstall", "widgets-api", "other"); code != 0 {
		t.Fatalf("uninstall: %s", out)
	}
	if _, err := dyn.Resource(apiGVR).Get(t.Context(), "v1alpha1."+group, metav1.GetOptions{}); err == nil {
		t.Fatal("APIService left after uninstall")
	}
}

func available(a *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(a.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" {
			return m["status"] == "True"
		}
	}
	return false
}

// regexpLine reports whether one line of out holds every part.
func regexpLine(out string, parts ...string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}
