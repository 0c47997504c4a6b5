package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/controller"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(testcluster.Run(m))
}

var (
	crdGVR  = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	instGVR = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "plugininstallations"}
	catGVR  = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "plugincatalogs"}
	tgtGVR  = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "targetclusters"}
	rolGVR  = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "pluginrollouts"}
)

// installCRDs applies the controller's CRDs to the cluster rc talks to and waits
// until they serve.
func installCRDs(t testing.TB, rc *rest.Config) {
	t.Helper()
	dc := dynamic.NewForConfigOrDie(rc)
	for _, raw := range v1alpha1.CRDs() {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(u.Object)
		if _, err := dc.Resource(crdGVR).Patch(t.Context(), u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "controller-test", Force: ptr(true)}); err != nil {
			t.Fatalf("apply CRD %s: %v", u.GetName(), err)
		}
		waitFor(t, 30*time.Second, "CRD "+u.GetName()+" established", func() (bool, string) {
			got, err := dc.Resource(crdGVR).Get(t.Context(), u.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				m := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, ""
				}
			}
			return false, fmt.Sprint(conds)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// waitFor polls cond until it holds, failing after timeout with its last word.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, last)
}

// pkgArchive packs a plugin package from files.
func pkgArchive(t testing.TB, files map[string]string) []byte {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, text := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(text), Mode: 0o644}
	}
	var buf bytes.Buffer
	if err := archive.Write(&buf, fsys); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// catalogPackages are the test catalog: base 1.0.0 (a Namespace and a
// marker), app 1.0.0 and 2.0.0 (requires base; a ConfigMap of its message,
// whose schema allows at most 20 characters).
// Plugin names start with prefix: tests that share the cluster keep apart.
func catalogPackages(t testing.TB, ns, prefix string) map[string][]byte {
	base := pkgArchive(t, map[string]string{
		"plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: ` + prefix + `base, version: 1.0.0}
spec:
  contributes:
    kubernetes: {manifests: [m.yaml]}
`,
		"m.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + "}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: base-marker, namespace: " + ns + "}\n",
	})
	app := func(version, extra string) []byte {
		return pkgArchive(t, map[string]string{
			"plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: ` + prefix + `app, version: ` + version + `}
spec:
  requires: [{name: ` + prefix + `base}]
  values:
    schema: values.schema.json
    defaults: {message: hello, password: ""}
    sensitive: [/password]
  contributes:
    kubernetes: {manifests: [m.yaml]}
`,
			"values.schema.json": `{"type": "object", "properties": {"message": {"type": "string", "maxLength": 20}, "password": {"type": "string"}, "region": {"type": "string"}}}`,
			"m.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: app-settings, namespace: ` + ns + `}
data:
  message: "{{ .Values.message }}"
  region: "{{ .Values.region | default "" }}"
  version: "` + version + `"` + extra + `
---
apiVersion: v1
kind: Secret
metadata: {name: app-password, namespace: ` + ns + `}
stringData: {password: "{{ .Values.password }}"}
`,
		})
	}
	return map[string][]byte{"base-1.0.0.tgz": base, "app-1.0.0.tgz": app("1.0.0", ""), "app-2.0.0.tgz": app("2.0.0", "")}
}

// startController runs a controller against rc until the test ends.
func startController(t testing.TB, rc *rest.Config, interval time.Duration) {
	t.Helper()
	c, err := controller.New(rc, controller.Options{
		Logger: testcluster.Logger(t), Action: &action.Config{NoBuiltin: true},
		MetricsAddr: "0", ProbeAddr: "0", WorkDir: t.TempDir(), DefaultInterval: interval,
		LeaseIdle: 200 * time.Millisecond, TargetResync: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("controller: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("the controller did not stop within a minute")
		}
	})
}

// condition returns a resource's condition's status, reason and message.
func condition(u *unstructured.Unstructured, typ string) (status, reason, msg string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), fmt.Sprint(m["message"])
		}
	}
	return "", "", ""
}

// readyAt waits until the object is Ready for its current generation.
func readyAt(t testing.TB, dc dynamic.Interface, gvr schema.GroupVersionResource, ns, name string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var got *unstructured.Unstructured
	waitFor(t, timeout, gvr.Resource+" "+name+" Ready", func() (bool, string) {
		u, err := dc.Resource(gvr).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st, reason, msg := condition(u, "Ready")
		applied, _, _ := unstructured.NestedInt64(u.Object, "status", "lastAppliedGeneration")
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		if st == "True" && observed == u.GetGeneration() && (gvr != instGVR || applied == u.GetGeneration()) {
			got = u
			return true, ""
		}
		return false, st + " " + reason + ": " + msg
	})
	return got
}

func create(t testing.TB, dc dynamic.Interface, gvr schema.GroupVersionResource, ns, text string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(text), &u.Object); err != nil {
		t.Fatal(err)
	}
	got, err := dc.Resource(gvr).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", u.GetName(), err)
	}
	return got
}

// edit changes an object's spec with fn and updates it, retrying conflicts.
func edit(t testing.TB, dc dynamic.Interface, gvr schema.GroupVersionResource, ns, name string, fn func(spec map[string]any)) {
	t.Helper()
	for range 10 {
		u, err := dc.Resource(gvr).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec, _ := u.Object["spec"].(map[string]any)
		fn(spec)
		if _, err = dc.Resource(gvr).Namespace(ns).Update(t.Context(), u, metav1.UpdateOptions{}); err == nil {
			return
		} else if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatalf("could not update %s", name)
}

func catalogConfigMap(t testing.TB, cs kubernetes.Interface, ns, name string, pkgs map[string][]byte) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, BinaryData: pkgs}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func namespace(t testing.TB, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func message(t testing.TB, cs kubernetes.Interface, ns string) (map[string]string, error) {
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "app-settings", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return cm.Data, nil
}

// TestInstallationLifecycle drives one PluginInstallation through what a
// platform team does with it, against the real control plane: create →
// installed with its dependency and Ready; the CLI sees it and may not touch it;
// values from a Secret; an edited value → upgraded; a value the schema refuses
// → Stalled naming the field, nothing changed; a version down → refused until
// allowed; drift → corrected; an installation depended on → not deletable;
// delete → uninstalled in reverse order.
func TestInstallationLifecycle(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt, apps = "ctrl-lifecycle", "ctrl-lifecycle-apps"
	namespace(t, cs, mgmt)
	catalogConfigMap(t, cs, mgmt, "packages", catalogPackages(t, apps, ""))
	if _, err := cs.CoreV1().Secrets(mgmt).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "app-secret", Namespace: mgmt},
		StringData: map[string]string{"password": "s3cr3t-from-secret"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startController(t, rc, 2*time.Second)
	checkKstatus(t, dc, mgmt)

	create(t, dc, catGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: main}, spec: {sources: [{configMap: packages}]}}`)
	create(t, dc, instGVR, mgmt, `apiVersion: kubeplug.dev/v1alpha1
kind: PluginInstallation
metadata: {name: web}
spec:
  catalogs: [main]
  plugins:
    - name: app
      version: 1.0.0
      values: {message: hi}
      valuesFrom: [{secretKeyRef: {name: app-secret, key: password}, path: /password}]
`)
	u := readyAt(t, dc, instGVR, mgmt, "web", 2*time.Minute)
	plugins, _, _ := unstructured.NestedSlice(u.Object, "status", "plugins")
	if got := fmt.Sprint(plugins); !strings.Contains(got, "name:app") || !strings.Contains(got, "name:base") || !strings.Contains(got, "version:1.0.0") {
		t.Errorf("status.plugins = %s", got)
	}
	if data, err := message(t, cs, apps); err != nil || data["message"] != "hi" {
		t.Fatalf("app-settings = %v, %v", data, err)
	}
	if sec, err := cs.CoreV1().Secrets(apps).Get(t.Context(), "app-password", metav1.GetOptions{}); err != nil || string(sec.Data["password"]) != "s3cr3t-from-secret" {
		t.Errorf("the value from the Secret did not arrive: %v", err)
	}
	if raw, _ := json.Marshal(u.Object["status"]); strings.Contains(string(raw), "s3cr3t") {
		t.Errorf("the status shows a sensitive value: %s", raw)
	}
	catalog := readyAt(t, dc, catGVR, mgmt, "main", 30*time.Second)
	if got, _, _ := unstructured.NestedStringSlice(catalog.Object, "status", "plugins"); strings.Join(got, " ") != "app@1.0.0 app@2.0.0 base@1.0.0" {
		t.Errorf("catalog status.plugins = %v", got)
	}

	// The CLI's status sees what the controller installed, and may not change it.
	cfg := &action.Config{NoBuiltin: true}
	status := action.NewStatus(cfg)
	status.Target.RESTConfig = rc
	report, l := status.Report(t.Context(), nil)
	if l.HasFatal() {
		t.Fatal(l)
	}
	found := false
	for _, r := range report {
		found = found || r.Plugin == "app"
	}
	if !found {
		t.Errorf("kubeplug status does not list app: %+v", report)
	}
	un := action.NewUninstall(cfg)
	un.Target.RESTConfig = rc
	un.Lease = action.Lease{Wait: 30 * time.Second}
	if _, l := un.Run(t.Context(), "app"); !strings.Contains(l.String(), "managed by PluginInstallation "+mgmt+"/web") {
		t.Errorf("CLI uninstall of the controller's plugin: %v", l)
	}

	// An edited value is applied.
	edit(t, dc, instGVR, mgmt, "web", func(spec map[string]any) {
		spec["plugins"].([]any)[0].(map[string]any)["values"] = map[string]any{"message": "bye"}
	})
	readyAt(t, dc, instGVR, mgmt, "web", time.Minute)
	if data, err := message(t, cs, apps); err != nil || data["message"] != "bye" {
		t.Fatalf("after the edit, app-settings = %v, %v", data, err)
	}

	// A value the plugin's schema refuses: Stalled, naming the field; nothing changes.
	edit(t, dc, instGVR, mgmt, "web", func(spec map[string]any) {
		spec["plugins"].([]any)[0].(map[string]any)["values"] = map[string]any{"message": strings.Repeat("x", 30)}
	})
	waitFor(t, time.Minute, "Stalled for a schema-invalid value", func() (bool, string) {
		u, _ := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "web", metav1.GetOptions{})
		st, reason, msg := condition(u, "Stalled")
		return st == "True" && strings.Contains(msg, "spec.plugins[0]") && strings.Contains(msg, "message"), st + " " + reason + ": " + msg
	})
	if data, _ := message(t, cs, apps); data["message"] != "bye" {
		t.Errorf("a refused value changed the cluster: %v", data)
	}

	// Up to 2.0.0, then down to 1.0.0: refused until allowed.
	edit(t, dc, instGVR, mgmt, "web", func(spec map[string]any) {
		p := spec["plugins"].([]any)[0].(map[string]any)
		p["values"], p["version"] = map[string]any{"message": "v2"}, "2.0.0"
	})
	readyAt(t, dc, instGVR, mgmt, "web", time.Minute)
	if data, _ := message(t, cs, apps); data["version"] != "2.0.0" {
		t.Fatalf("after the upgrade, app-settings = %v", data)
	}
	edit(t, dc, instGVR, mgmt, "web", func(spec map[string]any) {
		spec["plugins"].([]any)[0].(map[string]any)["version"] = "1.0.0"
	})
	waitFor(t, time.Minute, "a downgrade refused", func() (bool, string) {
		u, _ := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "web", metav1.GetOptions{})
		st, reason, msg := condition(u, "Stalled")
		return st == "True" && reason == controller.ReasonRefused && strings.Contains(msg, "downgrade"), st + " " + reason + ": " + msg
	})
	// In the controller's words: the field to set, not the CLI's flag.
	if u, err := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "web", metav1.GetOptions{}); err == nil {
		if _, _, msg := condition(u, "Stalled"); !strings.Contains(msg, "pec.allowDowngrade: true on the installation") || strings.Contains(msg, "--allow-downgrade") {
			t.Errorf("the refused downgrade speaks CLI: %s", msg)
		}
	}
	edit(t, dc, instGVR, mgmt, "web", func(spec map[string]any) { spec["allowDowngrade"] = true })
	readyAt(t, dc, instGVR, mgmt, "web", time.Minute)
	if data, _ := message(t, cs, apps); data["version"] != "1.0.0" {
		t.Fatalf("after the allowed downgrade, app-settings = %v", data)
	}

	// Drift is corrected within the interval.
	cm, err := cs.CoreV1().ConfigMaps(apps).Get(t.Context(), "app-settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["message"] = "edited by hand"
	if _, err := cs.CoreV1().ConfigMaps(apps).Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "hand-edit"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "drift corrected", func() (bool, string) {
		data, err := message(t, cs, apps)
		return err == nil && data["message"] == "v2", fmt.Sprint(data, err)
	})

	// An installation that another depends on is not deleted while it does.
	create(t, dc, instGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: user}, spec: {dependsOn: [web], catalogs: [main], plugins: [{name: base}]}}`)
	waitFor(t, time.Minute, "user Stalled: base is web's", func() (bool, string) {
		u, _ := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "user", metav1.GetOptions{})
		st, reason, msg := condition(u, "Stalled")
		return st == "True" && strings.Contains(msg, "managed by PluginInstallation "+mgmt+"/web"), st + " " + reason + ": " + msg
	})
	if err := dc.Resource(instGVR).Namespace(mgmt).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "web refused deletion", func() (bool, string) {
		u, _ := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "web", metav1.GetOptions{})
		st, reason, msg := condition(u, "Stalled")
		return reason == controller.ReasonStillNeeded && strings.Contains(msg, "user"), st + " " + reason + ": " + msg
	})
	if err := dc.Resource(instGVR).Namespace(mgmt).Delete(t.Context(), "user", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Then web goes, and its plugins with it.
	waitFor(t, 2*time.Minute, "web uninstalled and gone", func() (bool, string) {
		_, err := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if _, err := message(t, cs, apps); !apierrors.IsNotFound(err) {
		t.Errorf("app-settings after uninstall: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps(apps).Get(t.Context(), "base-marker", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("base-marker after uninstall: %v", err)
	}
}

// checkKstatus watches the installations of ns until the test ends and fails
// it for every status written that breaks kstatus' rules: Reconciling and
// Stalled both True, or Ready True while either is.
func checkKstatus(t *testing.T, dc dynamic.Interface, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	w, err := dc.Resource(instGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []string)
	go func() {
		var bad []string
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			ready, _, _ := condition(u, "Ready")
			rec, _, recMsg := condition(u, "Reconciling")
			stalled, _, stMsg := condition(u, "Stalled")
			if rec == "True" && (stalled == "True" || ready == "True") || stalled == "True" && ready == "True" {
				bad = append(bad, fmt.Sprintf("%s (resourceVersion %s): Ready=%s Reconciling=%s (%s) Stalled=%s (%s)", u.GetName(), u.GetResourceVersion(), ready, rec, recMsg, stalled, stMsg))
			}
		}
		done <- bad
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		for _, b := range <-done {
			t.Errorf("kstatus rules broken: %s", b)
		}
	})
}

// TestBadSpecsRefusedAtAdmission: what the CRDs' schemas and rules can say is
// refused by the API server itself, naming the field.
func TestBadSpecsRefusedAtAdmission(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const ns = "ctrl-admission"
	namespace(t, testcluster.Client(t), ns)
	tests := []struct{ name, spec, want string }{
		{"a plugin twice", `{plugins: [{name: a}, {name: a}]}`, `spec.plugins[1]: Duplicate value`},
		{"no plugins", `{plugins: []}`, `spec.plugins: Invalid value`},
		{"a bad plugin name", `{plugins: [{name: "Not_A_Name"}]}`, `spec.plugins[0].name`},
		{"two value sources in one", `{plugins: [{name: a, valuesFrom: [{secretKeyRef: {name: s, key: k}, targetField: /x, path: /y}]}]}`, `exactly one of secretKeyRef, configMapKeyRef and targetField`},
		{"a target field without a path", `{plugins: [{name: a, valuesFrom: [{targetField: /metadata/labels/x}]}]}`, `targetField needs a path`},
		{"a bad interval", `{interval: soon, plugins: [{name: a}]}`, `spec.interval`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(`{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: bad}, spec: `+tt.spec+`}`), &u.Object); err != nil {
				t.Fatal(err)
			}
			_, err := dc.Resource(instGVR).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{})
			if err == nil {
				_ = dc.Resource(instGVR).Namespace(ns).Delete(context.WithoutCancel(t.Context()), "bad", metav1.DeleteOptions{})
				t.Fatalf("accepted, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
	_, err := dc.Resource(rolGVR).Namespace(ns).Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeplug.dev/v1alpha1", "kind": "PluginRollout", "metadata": map[string]any{"name": "bad"},
		"spec": map[string]any{"clusterSelector": map[string]any{}, "template": map[string]any{"target": "x", "plugins": []any{map[string]any{"name": "a"}}}},
	}}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "leave template.target empty") {
		t.Errorf("a rollout template with a target: %v", err)
	}
}
