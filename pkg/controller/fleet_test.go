package controller_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/pkg/controller"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestFleetRollout manages three clusters from a fourth with one
// PluginRollout: the canary goes first; the second cluster fails (a quota
// refuses the plugin's objects) and halts the rollout before the third is
// touched; once it is fixed the rollout goes on by itself; a cluster that
// starts matching the selector gets the plugins; a changed template reaches
// every cluster, passing over one whose API server is down.
func TestFleetRollout(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt, apps = "ctrl-fleet", "ctrl-fleet-apps"
	namespace(t, cs, mgmt)
	catalogConfigMap(t, cs, mgmt, "packages", catalogPackages(t, apps, "fleet-"))

	clusters := map[string]*controlplane.ControlPlane{}
	clients := map[string]kubernetes.Interface{}
	for _, name := range []string{"fleet-a", "fleet-b", "fleet-c"} {
		began := time.Now()
		cp := testcluster.Start(t, controlplane.Options{}, 0)
		t.Logf("%s started in %s", name, time.Since(began).Round(time.Millisecond))
		clusters[name] = cp
		clients[name] = testcluster.NewClient(t, cp.RESTConfig())
		kubeconfig(t, cs, mgmt, name, cp.KubeconfigPath(), "prod")
	}
	// The management cluster itself, not selected yet.
	kubeconfig(t, cs, mgmt, "fleet-self", testcluster.ControlPlane(t).KubeconfigPath(), "staging")
	// fleet-b refuses every new ConfigMap in the plugins' namespace.
	namespace(t, clients["fleet-b"], apps)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-configmaps", Namespace: apps},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/configmaps": resource.MustParse("1")}}}
	if _, err := clients["fleet-b"].CoreV1().ResourceQuotas(apps).Create(t.Context(), quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startController(t, rc, time.Minute)

	create(t, dc, catGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: main}, spec: {sources: [{configMap: packages}]}}`)
	create(t, dc, rolGVR, mgmt, `apiVersion: kubeplug.dev/v1alpha1
kind: PluginRollout
metadata: {name: app}
spec:
  clusterSelector: {matchLabels: {env: prod}}
  template:
    catalogs: [main]
    timeout: 20s
    plugins: [{name: fleet-app, version: 1.0.0, values: {message: one}}]
`)
	phases := func() map[string]string {
		u, err := dc.Resource(rolGVR).Namespace(mgmt).Get(t.Context(), "app", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		list, _, _ := unstructured.NestedSlice(u.Object, "status", "clusters")
		for _, c := range list {
			m := c.(map[string]any)
			out[fmt.Sprint(m["name"])] = fmt.Sprint(m["phase"])
		}
		return out
	}
	waitFor(t, 3*time.Minute, "the rollout halted at fleet-b", func() (bool, string) {
		u, _ := dc.Resource(rolGVR).Namespace(mgmt).Get(t.Context(), "app", metav1.GetOptions{})
		st, _, msg := condition(u, "Stalled")
		return st == "True" && strings.Contains(msg, "fleet-b"), fmt.Sprint(st, " ", msg, " ", phases())
	})
	if p := phases(); p["fleet-a"] != controller.PhaseReady || p["fleet-b"] != controller.PhaseFailed || p["fleet-c"] != controller.PhasePending {
		t.Fatalf("halted phases = %v, want fleet-a Ready, fleet-b Failed, fleet-c Pending", p)
	}
	if _, err := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "app-fleet-c", metav1.GetOptions{}); err == nil {
		t.Fatal("fleet-c got an installation while the rollout was halted")
	}
	if data, err := message(t, clients["fleet-a"], apps); err != nil || data["message"] != "one" {
		t.Fatalf("fleet-a app-settings = %v, %v", data, err)
	}

	// Fixed, fleet-b converges by itself and the rollout goes on.
	if err := clients["fleet-b"].CoreV1().ResourceQuotas(apps).Delete(t.Context(), "no-configmaps", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	readyAt(t, dc, rolGVR, mgmt, "app", 3*time.Minute)
	for _, name := range []string{"fleet-a", "fleet-b", "fleet-c"} {
		if data, err := message(t, clients[name], apps); err != nil || data["message"] != "one" {
			t.Errorf("%s app-settings = %v, %v", name, data, err)
		}
	}

	// A cluster that starts matching gets the plugins.
	label(t, dc, mgmt, "fleet-self", "prod")
	waitFor(t, 2*time.Minute, "fleet-self Ready in the rollout", func() (bool, string) {
		p := phases()
		return p["fleet-self"] == controller.PhaseReady, fmt.Sprint(p)
	})
	if data, err := message(t, cs, apps); err != nil || data["message"] != "one" {
		t.Errorf("fleet-self app-settings = %v, %v", data, err)
	}

	// fleet-c goes down; a new template reaches the others, and fleet-c is
	// marked and passed over.
	if err := clusters["fleet-c"].Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "fleet-c unreachable", func() (bool, string) {
		u, _ := dc.Resource(tgtGVR).Namespace(mgmt).Get(t.Context(), "fleet-c", metav1.GetOptions{})
		st, reason, msg := condition(u, "Ready")
		return st == "False", st + " " + reason + " " + msg
	})
	edit(t, dc, rolGVR, mgmt, "app", func(spec map[string]any) {
		spec["template"].(map[string]any)["plugins"].([]any)[0].(map[string]any)["values"] = map[string]any{"message": "two"}
	})
	waitFor(t, 3*time.Minute, "the new template everywhere but fleet-c", func() (bool, string) {
		u, _ := dc.Resource(rolGVR).Namespace(mgmt).Get(t.Context(), "app", metav1.GetOptions{})
		st, _, msg := condition(u, "Ready")
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return st == "True" && observed == u.GetGeneration() && strings.Contains(msg, "1 unreachable"), st + " " + msg + " " + fmt.Sprint(phases())
	})
	if p := phases(); p["fleet-c"] != controller.PhaseUnreachable {
		t.Errorf("phases = %v, want fleet-c Unreachable", p)
	}
	for name, c := range map[string]kubernetes.Interface{"fleet-a": clients["fleet-a"], "fleet-b": clients["fleet-b"], "fleet-self": cs} {
		if data, err := message(t, c, apps); err != nil || data["message"] != "two" {
			t.Errorf("%s app-settings = %v, %v", name, data, err)
		}
	}

	// Deleting the rollout uninstalls from every reachable cluster.
	if err := dc.Resource(rolGVR).Namespace(mgmt).Delete(t.Context(), "app", metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the plugins gone from fleet-a and the management cluster", func() (bool, string) {
		_, errA := message(t, clients["fleet-a"], apps)
		_, errS := message(t, cs, apps)
		return errA != nil && errS != nil, fmt.Sprint(errA, errS)
	})
}

// kubeconfig makes a TargetCluster for the kubeconfig file at path, labelled env.
func kubeconfig(t testing.TB, cs kubernetes.Interface, ns, name, path, env string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: ns},
		Data:       map[string][]byte{"kubeconfig": raw},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create(t, dynamic.NewForConfigOrDie(testcluster.RESTConfig(t)), tgtGVR, ns, `{apiVersion: kubeplug.dev/v1alpha1, kind: TargetCluster, metadata: {name: `+name+`, labels: {env: `+env+`}}, spec: {kubeconfigSecret: {name: `+name+`-kubeconfig}}}`)
}

func label(t testing.TB, dc dynamic.Interface, ns, name, env string) {
	t.Helper()
	u, err := dc.Resource(tgtGVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"env": env})
	if _, err := dc.Resource(tgtGVR).Namespace(ns).Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
