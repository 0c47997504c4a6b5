package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Run(m)) }

// objs parses YAML documents, replacing NS with the test's namespace.
// stuckDeployment is a Deployment named name in namespace NS that never becomes
// ready: no node matches its selector, and it reports so within 2s.
func stuckDeployment(name string) string {
	return strings.ReplaceAll(`apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME, namespace: NS}
spec:
  replicas: 1
  progressDeadlineSeconds: 2
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      nodeSelector: {no-such-node: "true"}
      containers: [{name: c, image: registry.example/c:1}]
`, "NAME", name)
}

func objs(t testing.TB, ns, text string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for doc := range strings.SplitSeq(strings.ReplaceAll(text, "NS", ns), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("parse %q: %v", doc, err)
		}
		out = append(out, u)
	}
	return out
}

func newDeployer(t testing.TB, opts deploy.Options) *deploy.Deployer {
	t.Helper()
	opts.Logger = testcluster.Logger(t)
	d, err := deploy.New(testcluster.RESTConfig(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func dyn(t testing.TB) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(testcluster.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	cmGVR  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	depGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

func exists(t testing.TB, gvr schema.GroupVersionResource, ns, name string) bool {
	t.Helper()
	_, err := dyn(t).Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func inventory(t testing.TB, d *deploy.Deployer, plugin string) *deploy.Record {
	t.Helper()
	invs, err := d.Inventories(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range invs {
		if inv.Plugin == plugin {
			return inv
		}
	}
	return nil
}

// unique makes plugin names unique per test: inventories share one namespace.
func unique(t testing.TB, name string) string {
	return fmt.Sprintf("%s-%d", name, time.Now().UnixNano()%1_000_000_000)
}

func TestCRDsAndNamespacesFirstThenCustomResources(t *testing.T) {
	ns := "crd-" + fmt.Sprint(time.Now().UnixNano()%1_000_000)
	group := fmt.Sprintf("t%d.kubeplug.dev", time.Now().UnixNano()%1_000_000)
	plugin := unique(t, "widgets")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	// The custom resource comes first in the list: the deployer must still apply the
	// CRD and namespace first and wait for the CRD to be Established.
	content := objs(t, ns, strings.ReplaceAll(`
apiVersion: GROUP/v1
kind: Widget
metadata: {name: w1, namespace: NS}
spec: {size: 3}
---
apiVersion: v1
kind: Namespace
metadata: {name: NS}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.GROUP}
spec:
  group: GROUP
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, properties: {size: {type: integer}}}
`, "GROUP", group))
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	res, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: content}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied != 3 {
		t.Errorf("applied %d objects, want 3", res.Applied)
	}
	w, err := dyn(t).Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}).Namespace(ns).Get(t.Context(), "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("custom resource: %v", err)
	}
	if got, _, _ := unstructured.NestedInt64(w.Object, "spec", "size"); got != 3 {
		t.Errorf("spec.size = %d", got)
	}
	if inv := inventory(t, d, plugin); inv == nil || inv.Phase != deploy.PhaseReady || len(inv.Objects) != 3 {
		t.Errorf("inventory = %+v", inv)
	}
}

func TestDeploymentBecomesReady(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "web")
	var events []deploy.Event
	d := newDeployer(t, deploy.Options{Timeout: 2 * time.Minute, Events: func(e deploy.Event) { events = append(events, e) }})
	content := objs(t, ns, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: NS}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.example/web:1}]
`)
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: content}}); err != nil {
		t.Fatal(err)
	}
	got, err := dyn(t).Resource(depGVR).Namespace(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(got.Object, "status", "availableReplicas"); n != 2 {
		t.Errorf("availableReplicas = %d after the plugin was ready", n)
	}
	var types []string
	for _, e := range events {
		// Whether the wait saw the Deployment unready first depends on how fast
		// the simulated kubelet is; when it did, the event names it.
		if e.Type == deploy.ObjectWaiting {
			if !strings.HasSuffix(e.Object, "/web") {
				t.Errorf("ObjectWaiting names %s, want the Deployment web", e.Object)
			}
			continue
		}
		types = append(types, string(e.Type))
	}
	if want := "WaveStarted PluginApplied ObjectReady PluginReady WaveFinished"; strings.Join(types, " ") != want {
		t.Errorf("events = %v, want %s", types, want)
	}
}

func TestReadinessTimeoutNamesTheObjectAndItsConditions(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "stuck")
	d := newDeployer(t, deploy.Options{Timeout: 8 * time.Second})
	content := objs(t, ns, stuckDeployment("stuck"))
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	_, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: content}})
	if err == nil {
		t.Fatal("a Deployment that cannot schedule became ready")
	}
	msg := err.Error()
	for _, want := range []string{"plugin " + plugin, "not ready after 8s", "Deployment.apps/" + ns + "/stuck", "Available=False"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if inv := inventory(t, d, plugin); inv == nil || inv.Phase != deploy.PhaseFailed || len(inv.Objects) != 1 {
		t.Errorf("inventory after a failed apply = %+v, want Failed with the Deployment", inv)
	}
}

func TestPruneWhatANewVersionDropped(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "cfg")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	v1 := objs(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: NS}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: NS}\n")
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: v1}}); err != nil {
		t.Fatal(err)
	}
	v2 := objs(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: NS}\ndata: {v: \"2\"}\n")
	res, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "2.0.0", Objects: v2}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pruned != 1 || exists(t, cmGVR, ns, "b") || !exists(t, cmGVR, ns, "a") {
		t.Errorf("pruned %d; b exists %v; a exists %v", res.Pruned, exists(t, cmGVR, ns, "b"), exists(t, cmGVR, ns, "a"))
	}
	if inv := inventory(t, d, plugin); inv.Version != "2.0.0" || len(inv.Objects) != 1 {
		t.Errorf("inventory = %+v", inv)
	}
}

func TestUninstallOrderAndRefusal(t *testing.T) {
	ns := testcluster.Namespace(t)
	base, app := unique(t, "base"), unique(t, "app")
	var removed []string
	d := newDeployer(t, deploy.Options{Timeout: time.Minute, Events: func(e deploy.Event) {
		if e.Type == deploy.PluginRemoved {
			removed = append(removed, e.Plugin)
		}
	}})
	cm := func(name string) []*unstructured.Unstructured {
		return objs(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+name+", namespace: NS}\n")
	}
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: base, Version: "1.0.0", Objects: cm("base")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ApplyWave(t.Context(), 1, []deploy.Unit{{Plugin: app, Version: "1.0.0", Requires: []string{base}, Objects: cm("app")}}); err != nil {
		t.Fatal(err)
	}
	_, err := d.Uninstall(t.Context(), []string{base}, false)
	if !errors.Is(err, deploy.ErrRequired) || !strings.Contains(err.Error(), "cannot uninstall "+base+": required by an installed plugin "+app) {
		t.Fatalf("uninstall of a required plugin: %v", err)
	}
	if !exists(t, cmGVR, ns, "base") {
		t.Fatal("a refused uninstall removed objects")
	}
	done, err := d.Uninstall(t.Context(), []string{base}, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := app + " " + base; strings.Join(done, " ") != want || strings.Join(removed, " ") != want {
		t.Errorf("removed %v (events %v), want dependents first: %s", done, removed, want)
	}
	if exists(t, cmGVR, ns, "base") || exists(t, cmGVR, ns, "app") || inventory(t, d, base) != nil {
		t.Error("uninstall left objects or the inventory behind")
	}
}

func TestConflictNamesTheOtherManager(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "owned")
	other := objs(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared, namespace: NS}\ndata: {level: debug}\n")[0]
	if _, err := dyn(t).Resource(cmGVR).Namespace(ns).Apply(t.Context(), "shared", other, metav1.ApplyOptions{FieldManager: "platform-team"}); err != nil {
		t.Fatal(err)
	}
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	mine := objs(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared, namespace: NS}\ndata: {level: info}\n")
	_, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: mine}})
	if err == nil || !strings.Contains(err.Error(), `conflict with "platform-team"`) || !strings.Contains(err.Error(), ".data.level") {
		t.Fatalf("error = %v, want a conflict naming platform-team and .data.level", err)
	}
	forced := newDeployer(t, deploy.Options{Timeout: time.Minute, ForceConflicts: true})
	if _, err := forced.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: objs(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared, namespace: NS}\ndata: {level: info}\n")}}); err != nil {
		t.Fatalf("with ForceConflicts: %v", err)
	}
}

func TestRejectedObjectNamesPluginObjectAndServerMessage(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "bad")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	bad := objs(t, ns, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bad, namespace: NS}\nspec: {replicas: -1, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: x}]}}}\n")
	_, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: bad}})
	if err == nil {
		t.Fatal("an invalid Deployment was accepted")
	}
	want := "plugin " + plugin + ": Deployment.apps/" + ns + "/bad: rejected by the API server: "
	if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "spec.replicas") {
		t.Errorf("error = %q, want prefix %q and the field", err, want)
	}
}

func TestRerunAfterAKilledApplyConverges(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "killed")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	v1 := objs(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: old, namespace: NS}\n")
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: v1}}); err != nil {
		t.Fatal(err)
	}
	// v2 drops "old" and adds a Deployment that cannot become ready; the apply is
	// killed (its context cancelled) while it waits.
	v2 := func() []*unstructured.Unstructured {
		return objs(t, ns, `apiVersion: v1
kind: ConfigMap
metadata: {name: new, namespace: NS}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: slow, namespace: NS}
spec:
  replicas: 1
  selector: {matchLabels: {app: slow}}
  template:
    metadata: {labels: {app: slow}}
    spec:
      nodeSelector: {pool: later}
      containers: [{name: c, image: registry.example/c:1}]
`)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	_, err := d.ApplyWave(ctx, 0, []deploy.Unit{{Plugin: plugin, Version: "2.0.0", Objects: v2()}})
	cancel()
	if err == nil {
		t.Fatal("the killed apply succeeded")
	}
	inv := inventory(t, d, plugin)
	if inv == nil || len(inv.Objects) != 3 {
		t.Fatalf("inventory after the killed apply = %+v, want old ∪ new (3 objects)", inv)
	}
	// Make the Deployment schedulable by moving it to the pool the nodes have, and
	// re-run: it converges, and "old" is pruned.
	fixed := v2()
	_ = unstructured.SetNestedStringMap(fixed[1].Object, map[string]string{}, "spec", "template", "spec", "nodeSelector")
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "2.0.0", Objects: fixed}}); err != nil {
		t.Fatal(err)
	}
	if exists(t, cmGVR, ns, "old") || !exists(t, cmGVR, ns, "new") {
		t.Error("the re-run did not converge: old should be pruned, new present")
	}
	if inv := inventory(t, d, plugin); inv.Phase != deploy.PhaseReady || len(inv.Objects) != 2 {
		t.Errorf("inventory = %+v", inv)
	}
}

func TestReapplySkipsUnchangedAndCorrectsDrift(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "drift")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	content := func() []*unstructured.Unstructured {
		return objs(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: NS}\ndata: {level: info}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: NS}\ndata: {level: info}\n")
	}
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: content()}}); err != nil {
		t.Fatal(err)
	}
	res, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: content()}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied != 2 {
		t.Errorf("applied %d, want both objects counted as applied", res.Applied)
	}
	// Someone edits b out of band; the next apply puts it back.
	cms := testcluster.Client(t).CoreV1().ConfigMaps(ns)
	b, err := cms.Get(t.Context(), "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Data["level"] = "debug"
	if _, err := cms.Update(t.Context(), b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The drift is noticed (b is applied again, not skipped); the editor now owns the
	// field, so the apply reports the conflict, and a forced apply takes it back.
	_, err = d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: content()}})
	if err == nil || !strings.Contains(err.Error(), "ConfigMap/"+ns+"/b: field conflict") {
		t.Fatalf("re-apply after drift: %v, want a conflict on b", err)
	}
	forced := newDeployer(t, deploy.Options{Timeout: time.Minute, ForceConflicts: true})
	if _, err := forced.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: content()}}); err != nil {
		t.Fatal(err)
	}
	b, err = cms.Get(t.Context(), "b", metav1.GetOptions{})
	if err != nil || b.Data["level"] != "info" {
		t.Errorf("drifted value after re-apply = %q (%v), want info", b.Data["level"], err)
	}
}

func TestUnreachableAPIServerIsOneClearError(t *testing.T) {
	cfg := testcluster.RESTConfig(t)
	cfg.Host = "https://127.0.0.1:1" // nothing listens on port 1
	d, err := deploy.New(cfg, deploy.Options{Retry: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 3}})
	if err != nil {
		t.Fatal(err)
	}
	err = d.Ping(t.Context())
	if err == nil || !strings.Contains(err.Error(), "the API server did not answer after 3 tries") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("ping of a closed port: %v", err)
	}
}

// TestUninstallDryRun: a server dry run of an uninstall reports what would go,
// with the API server checking each delete, and changes nothing: objects, Helm
// release and record stay, and a real uninstall afterwards removes them.
func TestUninstallDryRun(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "dry")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: cms(t, ns, map[string]string{"d": "1"}),
		Releases: []deploy.HelmRelease{{Name: "web", Namespace: ns, Chart: testChart(t)}}}}); err != nil {
		t.Fatal(err)
	}
	dry := newDeployer(t, deploy.Options{Timeout: time.Minute, DryRun: true})
	done, err := dry.Uninstall(t.Context(), []string{plugin}, false)
	if err != nil || len(done) != 1 || done[0] != plugin {
		t.Fatalf("dry-run uninstall = %v, %v", done, err)
	}
	if !exists(t, cmGVR, ns, "d") {
		t.Fatal("a dry-run uninstall deleted an object")
	}
	if h, err := d.History(t.Context(), plugin); err != nil || len(h) != 1 {
		t.Fatalf("a dry-run uninstall touched the record: %v, %v", h, err)
	}
	if _, err := d.Uninstall(t.Context(), []string{plugin}, false); err != nil {
		t.Fatal(err)
	}
	if exists(t, cmGVR, ns, "d") {
		t.Fatal("the real uninstall left the object")
	}
}
