package served

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeplug/kubeplug/sdk/apiserver"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
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

func TestServedAPI(t *testing.T) {
	e := newEnv(t, "")
	ns, group, dir, port, dyn, kubectl, kubeplug, cluster := e.ns, e.group, e.dir, e.port, e.dyn, e.kubectl, e.kubeplug, e.cluster
	serve := func(ln net.Listener) (stop func()) {
		return e.serve(ln, apiserver.Options{
			Resources: []apiserver.Resource{{Kind: "Widget", Plural: "widgets", Namespaced: true}},
			Validate: func(_ context.Context, w *unstructured.Unstructured) error {
				if v, ok, _ := unstructured.NestedFieldNoCopy(w.Object, "spec", "size"); ok && v.(float64) < 1 {
					return field.Invalid(field.NewPath("spec", "size"), v, "must be at least 1")
				}
				return nil
			},
		})
	}
	stop := serve(e.listen())
	e.waitApplied()

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

	// Stored by the cluster's API server: a Secret of the storage's type in
	// the storage namespace.
	if out, err := kubectl("get", "secrets", "-n", ns, "-l", "apiserver.sdk.kubeplug.dev/resource=widgets."+group, "-o", "jsonpath={.items[*].type}"); err != nil || out != string(apiserver.SecretType) {
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

	// An upgrade from a server that kept its objects as ConfigMaps: one
	// written as that server wrote it (as its ServiceAccount, which the
	// storage policy lets write, with a Role of the test's for ConfigMaps) is
	// a widget again once the server restarts, with its uid, and the
	// ConfigMap is gone.
	legacyRBAC := filepath.Join(dir, "legacy-rbac.yaml")
	write(t, legacyRBAC, `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: legacy-storage, namespace: `+ns+`}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [create]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: legacy-storage, namespace: `+ns+`}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: legacy-storage}
subjects: [{kind: ServiceAccount, name: widgets-api, namespace: `+ns+`}]
`)
	if out, err := kubectl("apply", "-f", legacyRBAC); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	legacy := filepath.Join(dir, "legacy.yaml")
	write(t, legacy, `apiVersion: v1
kind: ConfigMap
metadata:
  name: widgets-`+groupHash(group)+`.`+ns+`.old
  namespace: `+ns+`
  labels: {apiserver.sdk.kubeplug.dev/resource: widgets.`+group+`, apiserver.sdk.kubeplug.dev/namespace: `+ns+`, team: a}
  annotations: {apiserver.sdk.kubeplug.dev/name: old}
data:
  object.json: '{"apiVersion":"`+group+`/v1alpha1","kind":"Widget","metadata":{"name":"old","namespace":"`+ns+`","labels":{"team":"a"}},"spec":{"size":9}}'
`)
	out, err = kubectl("create", "-f", legacy, "-o", "jsonpath={.metadata.uid}", "--as=system:serviceaccount:"+ns+":widgets-api")
	if err != nil {
		t.Fatalf("write the ConfigMap storage of an earlier server: %v\n%s", err, out)
	}
	legacyUID := out

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
	if out, err := kubectl("get", "widgets."+group, "-l", "team=a", "-n", ns, "-o", "jsonpath={.items[*].metadata.name} {.items[*].metadata.uid} {.items[*].spec.size}"); err != nil || out != "old "+legacyUID+" 9" {
		t.Fatalf("the widget kept as a ConfigMap before the upgrade, after it: %v %q (want uid %s)", err, out, legacyUID)
	}
	if out, err := kubectl("get", "configmaps", "-n", ns, "-l", "apiserver.sdk.kubeplug.dev/resource=widgets."+group, "-o", "name"); err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("ConfigMap storage left after the upgrade: %v\n%s", err, out)
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

// groupHash is the part of a storage object's name that names its group, as
// sdk/apiserver names it.
func groupHash(group string) string {
	g := sha256.Sum256([]byte(group))
	return hex.EncodeToString(g[:3])
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
