package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/controller"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/hosts"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// otherProviderOption is an option of a provider other than hosts.
type otherProviderOption struct{}

func (otherProviderOption) Provider() string { return "aws" }
func (otherProviderOption) String() string   { return "--aws-only" }

// TestManagedClusterUpgrade moves a ManagedCluster's Kubernetes version
// through its resource. The fake provider run answers for the cluster through
// a versionProxy (TestTargetVersionMove) that reports the version the last up
// brought up, and refuses 1.38.0 as the hosts provider refuses a version its
// node programs are not (provider.ErrUnsupportedVersion, before any host):
//   - the controller's provider options reach the hosts provider's run, those
//     of other providers not;
//   - 1.36.4 → Ready; two installations target it: vm-app 1.0.0, vm-legacy;
//   - spec.clusterFile at 1.38.0 → Stalled and Failed, reason
//     KubernetesVersionNotSupported, naming the version; up is not retried
//     (no loop), the machines and status.kubernetesVersion stay;
//   - at 1.37.1 → up runs again, Ready, status.kubernetesVersion 1.37.1; the
//     TargetCluster reads the new version at once (its resync is an hour: the
//     ManagedCluster's up changes it), vm-app moves to 2.0.0 and the legacy
//     installation goes Stalled naming vm-legacy and its constraint.
func TestManagedClusterUpgrade(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt, apps = "ctrl-mcupgrade", "ctrl-mcupgrade-apps"
	namespace(t, cs, mgmt)
	namespace(t, cs, apps)
	proxy := startVersionProxy(t, rc, "v1.36.4")
	if _, err := cs.CoreV1().Secrets(mgmt).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hosts-key", Namespace: mgmt}, Type: corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{corev1.SSHAuthPrivateKey: []byte("TEST KEY")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	catalogConfigMap(t, cs, mgmt, "packages", versionedPackages(t, apps, map[string]string{"vm-app@1.0.0": "<1.37", "vm-app@2.0.0": ">=1.37", "vm-legacy@1.0.0": "<1.37"}))
	runner := &fakeRunner{kubeconfig: proxy.kubeconfig(t), onUp: func(cl *config.Cluster) error {
		v := cl.KubernetesVersion.String()
		if v == "1.38.0" {
			return fmt.Errorf("cluster.yaml:5:22: spec.kubernetesVersion: %w %s: the hosts provider runs the Kubernetes of the node programs it delivers, and those in /bin ($KUBEPLUG_LOCALCLUSTER_BIN) are Kubernetes 1.37.1", provider.ErrUnsupportedVersion, v)
		}
		proxy.set("v" + v)
		return nil
	}}
	startClusterController(t, rc, runner, func(o *controller.Options) {
		o.TargetResync = time.Hour
		// The controller's --kubernetes-bin, and an option of another provider.
		o.ClusterProviderOptions = []provider.Option{hosts.KubernetesBin{Dir: "/k8s/1.36"}, otherProviderOption{}}
	})
	at := func(version string) string {
		return indent(strings.Replace(hostsClusterFile("edge", ""), "kubernetesVersion: 1.37.1", "kubernetesVersion: "+version, 1), "    ")
	}
	create(t, dc, mclGVR, mgmt, `apiVersion: kubeplug.dev/v1alpha1
kind: ManagedCluster
metadata: {name: edge}
spec:
  sshKeySecret: {name: hosts-key}
  clusterFile: |
`+at("1.36.4"))
	conditionOf(t, dc, mgmt, "edge", "Ready", "True")
	t.Cleanup(func() { // after the installations are gone, while the controller runs
		ctx := context.WithoutCancel(t.Context())
		_ = dc.Resource(mclGVR).Namespace(mgmt).Delete(ctx, "edge", metav1.DeleteOptions{})
		for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if _, err := dc.Resource(mclGVR).Namespace(mgmt).Get(ctx, "edge", metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return
			}
		}
		t.Errorf("ManagedCluster edge not gone a minute after its deletion")
	})
	create(t, dc, catGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: main}, spec: {sources: [{configMap: packages}]}}`)
	create(t, dc, instGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: app}, spec: {target: edge, catalogs: [main], interval: 1h, plugins: [{name: vm-app, version: ">=1.0.0 <3"}]}}`)
	create(t, dc, instGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: legacy}, spec: {target: edge, catalogs: [main], interval: 1h, plugins: [{name: vm-legacy}]}}`)
	uninstallAtEnd(t, dc, mgmt, "app", "legacy")
	for _, name := range []string{"app", "legacy"} {
		readyAt(t, dc, instGVR, mgmt, name, 2*time.Minute)
	}
	installed := func(name string) string {
		cm, err := cs.CoreV1().ConfigMaps(apps).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return cm.Data["version"]
	}
	if got := installed("vm-app"); got != "1.0.0" {
		t.Fatalf("on 1.36.4, vm-app %s, want 1.0.0", got)
	}
	ups, _, _ := runner.counts()
	runner.mu.Lock()
	if got := strings.Join(runner.options, " "); got != "--kubernetes-bin /k8s/1.36" {
		t.Errorf("the hosts provider's options: %q, want the controller's --kubernetes-bin alone (not another provider's)", got)
	}
	runner.mu.Unlock()

	// A version the provider cannot run: Stalled, not retried.
	setClusterFile(t, dc, mgmt, "edge", at("1.38.0"))
	reason, msg := conditionOf(t, dc, mgmt, "edge", "Stalled", "True")
	if reason != controller.ReasonVersionNotSupported || !strings.Contains(msg, "unsupported Kubernetes version 1.38.0") || !strings.Contains(msg, "spec.kubernetesVersion") {
		t.Errorf("Stalled: %s: %s", reason, msg)
	}
	if reason, msg := conditionOf(t, dc, mgmt, "edge", "Failed", "True"); reason != controller.ReasonVersionNotSupported || !strings.Contains(msg, "stays at Kubernetes 1.36.4") {
		t.Errorf("Failed: %s: %s", reason, msg)
	}
	time.Sleep(4 * time.Second) // four retry intervals
	if n, _, _ := runner.counts(); n != ups+1 {
		t.Errorf("%d ups after the refused version, want 1: a refused version is not retried", n-ups)
	}
	mc := getMC(t, dc, mgmt, "edge")
	if v, _, _ := unstructured.NestedString(mc.Object, "status", "kubernetesVersion"); v != "1.36.4" {
		t.Errorf("status.kubernetesVersion %q after a refused move, want 1.36.4", v)
	}
	if got := machinesOf(t, dc, mgmt, "edge"); strings.Count(got, " Ready [Ready]") != 3 {
		t.Errorf("the machines after a refused move (untouched, Ready):\n%s", got)
	}

	// The upgrade.
	setClusterFile(t, dc, mgmt, "edge", at("1.37.1"))
	waitFor(t, time.Minute, "the ManagedCluster Ready at 1.37.1, not Stalled", func() (bool, string) {
		u := getMC(t, dc, mgmt, "edge")
		st, reason, msg := condition(u, "Ready")
		stalled, _, _ := condition(u, "Stalled")
		v, _, _ := unstructured.NestedString(u.Object, "status", "kubernetesVersion")
		return st == "True" && v == "1.37.1" && stalled == "", fmt.Sprintf("Ready=%s %s: %s; Stalled=%q; version %s", st, reason, msg, stalled, v)
	})
	waitFor(t, 30*time.Second, "the TargetCluster at 1.37.1", func() (bool, string) {
		u, err := dc.Resource(tgtGVR).Namespace(mgmt).Get(t.Context(), "edge", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		v, _, _ := unstructured.NestedString(u.Object, "status", "kubernetesVersion")
		return v == "1.37.1", v
	})
	waitFor(t, 2*time.Minute, "vm-app moved to 2.0.0 and legacy Stalled naming vm-legacy", func() (bool, string) {
		app, err := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "app", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		legacy, err := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "legacy", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ast, _, _ := condition(app, "Ready")
		lst, lreason, lmsg := condition(legacy, "Stalled")
		got := installed("vm-app")
		return ast == "True" && got == "2.0.0" && lst == "True" && lreason == controller.ReasonRefused && strings.Contains(lmsg, "vm-legacy") && strings.Contains(lmsg, "<1.37"),
			fmt.Sprintf("app Ready=%s, vm-app %s; legacy Stalled=%s %s: %s", ast, got, lst, lreason, lmsg)
	})
	if got := installed("vm-legacy"); got != "1.0.0" {
		t.Errorf("the blocked installation changed the cluster: vm-legacy %s, want 1.0.0 left", got)
	}
}

func getMC(t *testing.T, dc dynamic.Interface, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dc.Resource(mclGVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// setClusterFile replaces a ManagedCluster's spec.clusterFile (text indented
// as in the manifests; the indent is taken off).
func setClusterFile(t *testing.T, dc dynamic.Interface, ns, name, indented string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(indented, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "    ")
	}
	edit(t, dc, mclGVR, ns, name, func(spec map[string]any) { spec["clusterFile"] = strings.Join(lines, "\n") + "\n" })
}
