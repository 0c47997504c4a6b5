package hosts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/controller"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// hostKubelet is a plugin the controller's plugin directory offers: the
// kubelet flags the test hosts need (their disk is this machine's, shared and
// nearly full).
const hostKubelet = `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: host-kubelet, version: 0.1.0, description: kubelet flags for the test hosts}
spec:
  contributes:
    nodes:
      - kubelet:
          flags: {eviction-hard: "memory.available<100Mi,nodefs.available<1%,imagefs.available<1%", image-gc-high-threshold: "100", image-gc-low-threshold: "99"}
`

// managedClusterFile is the ManagedCluster's cluster file: no key file, no
// known_hosts file (the resource gives them).
func managedClusterFile(version string, addrs []string) string {
	return fmt.Sprintf(`apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: managed}
spec:
  kubernetesVersion: %s
  provider:
    hosts:
      ssh: {user: %s}
      pools:
        - name: control-plane
          hosts: [{address: %s}]
        - name: workers
          hosts: [{address: %s}, {address: %s}]
  nodePools:
    - {name: workers, role: worker, count: 2}
  plugins:
    enabled:
      - name: control-plane
        values: {clusterCIDR: 10.246.0.0/16}
      - name: host-kubelet
`, version, sshUser, addrs[0], addrs[1], addrs[2])
}

// nodePrograms points the hosts provider at the built node programs, as
// TestCluster does, and returns the directory of the Kubernetes programs of
// the version before (make localcluster-1.36, beside make localcluster's).
func nodePrograms(t *testing.T, dir string) (previous string) {
	t.Helper()
	bin, err := controlplane.FindBinDir("")
	if err != nil {
		t.Fatalf("the local control plane is not built (make localcluster): %v", err)
	}
	previous = filepath.Join(filepath.Dir(filepath.Dir(bin)), "localcluster-1.36", "bin")
	nodeBin := os.Getenv("KUBEPLUG_LOCALNODE_BIN")
	if nodeBin == "" {
		nodeBin = filepath.Join(filepath.Dir(filepath.Dir(bin)), "localnode", "bin")
	}
	if _, err := os.Stat(filepath.Join(nodeBin, "containerd")); err != nil {
		t.Fatalf("the node programs are not built (make localnode): %v", err)
	}
	t.Setenv("KUBEPLUG_LOCALCLUSTER_BIN", bin)
	t.Setenv("KUBEPLUG_LOCALNODE_BIN", nodeBin)
	if os.Getenv("KUBEPLUG_NODE_AGENT") == "" {
		agent := filepath.Join(dir, "kubeplug")
		cmd := exec.Command("go", "build", "-o", agent, "github.com/kubeplug/kubeplug/cmd/kubeplug")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build the node agent: %v\n%s", err, out)
		}
		t.Setenv("KUBEPLUG_NODE_AGENT", agent)
	}
	return previous
}

// TestManagedCluster: a management API server and a controller with the
// Kubernetes programs of 1.37.1 and 1.36.3 (its --kubernetes-bin); a
// ManagedCluster at 1.36.3 on the three sshd machines → the controller brings
// the cluster up with the hosts provider (the key from a Secret, the host
// keys trusted on first use), publishes its kubeconfig and a TargetCluster,
// and an installation targeting it by name installs hello 1.0.0 there (its
// 2.0.0 needs Kubernetes >=1.37). The resource's version moves
// (upgradeThroughResource) upgrade the cluster to 1.37.1 and the
// installation to hello 2.0.0. Deleting the ManagedCluster runs down: no
// kubeplug file, unit or process (kubelet, etcd, containerd and its shims) is
// left on the hosts, and the Secret and TargetCluster are gone.
func TestManagedCluster(t *testing.T) {
	requireHostsE2E(t)
	dir := t.TempDir()
	previous := nodePrograms(t, dir)
	if _, err := os.Stat(filepath.Join(previous, "kube-apiserver")); err != nil {
		t.Fatalf("the Kubernetes programs of 1.36 are not built (make localcluster-1.36): %v", err)
	}
	binOpts, err := provider.FlagOptions("--kubernetes-bin", previous)
	if err != nil {
		t.Fatal(err)
	}
	ms, key := sshHosts(t, 3)
	var addrs []string
	for i, m := range ms {
		addrs = append(addrs, m.Node.Network.NodeIP(i).String())
	}
	mgmt := testcluster.Start(t, controlplane.Options{}, 0)
	rc := mgmt.RESTConfig()
	applyCRDs(t, rc)

	write(t, filepath.Join(dir, "plugins", "host-kubelet", "plugin.yaml"), hostKubelet)
	workDir := filepath.Join(dir, "controller")
	ctl, err := controller.New(rc, controller.Options{
		Logger: testcluster.Logger(t), Action: &action.Config{PluginDirs: []string{filepath.Join(dir, "plugins")}},
		MetricsAddr: "0", ProbeAddr: "0", WorkDir: workDir, TargetResync: 5 * time.Second, ClusterRetry: 10 * time.Second,
		ClusterProviderOptions: binOpts,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})

	// After controller.New, which gives controller-runtime its logger.
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := ctrlv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ns = "fleet"
	pem, err := os.ReadFile(key) //nolint:gosec // the test's key
	if err != nil {
		t.Fatal(err)
	}
	hello := func(version, kubernetes, greeting string) []byte {
		return pluginArchive(t, map[string]string{
			"plugin.yaml": "apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: hello, version: " + version + "}\nspec:\n  kubernetesVersion: \"" + kubernetes + "\"\n  contributes:\n    kubernetes: {manifests: [m.yaml]}\n",
			"m.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hello, namespace: default}\ndata: {greeting: " + greeting + "}\n",
		})
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hosts-key"}, Type: corev1.SecretTypeSSHAuth, Data: map[string][]byte{corev1.SSHAuthPrivateKey: pem}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "packages"}, BinaryData: map[string][]byte{
			"hello-1.0.0.tgz": hello("1.0.0", "<1.37", "from-the-fleet"), "hello-2.0.0.tgz": hello("2.0.0", ">=1.37", "from-the-fleet-2"),
		}},
		&ctrlv1.PluginCatalog{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"}, Spec: ctrlv1.PluginCatalogSpec{Sources: []ctrlv1.CatalogSource{{ConfigMap: "packages"}}}},
		&ctrlv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}, Spec: ctrlv1.ManagedClusterSpec{
			ClusterFile: managedClusterFile("1.36.3", addrs), SSHKeySecret: &ctrlv1.KeyRefOptionalKey{Name: "hosts-key"}, AcceptNewHostKeys: true,
		}},
		&ctrlv1.PluginInstallation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}, Spec: ctrlv1.PluginInstallationSpec{
			Target: "edge", Catalogs: []string{"main"}, Plugins: []ctrlv1.InstalledPlugin{{Name: "hello", Version: ">=1.0.0 <3"}},
		}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	began := time.Now()
	mc := &ctrlv1.ManagedCluster{}
	poll(t, 15*time.Minute, "ManagedCluster edge Ready", func() (bool, string) {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "edge"}, mc); err != nil {
			return false, err.Error()
		}
		return meta.IsStatusConditionTrue(mc.Status.Conditions, "Ready"), fmt.Sprint(mc.Status.Conditions)
	})
	t.Logf("ManagedCluster Ready in %s: %v", time.Since(began).Round(time.Second), meta.FindStatusCondition(mc.Status.Conditions, "Ready").Message)
	if mc.Status.KubernetesVersion != "1.36.3" || mc.Status.KubeconfigSecret != "edge-kubeconfig" {
		t.Errorf("status: %+v", mc.Status)
	}
	// The hosts' keys the controller accepted, for the test's own connections.
	known := filepath.Join(dir, "known_hosts")
	b, err := os.ReadFile(filepath.Join(workDir, "clusters", ns, "edge", "known_hosts"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, known, string(b))

	sec := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "edge-kubeconfig"}, sec); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(sec.Data["kubeconfig"])
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://"+addrs[0]+":6443" {
		t.Errorf("the published kubeconfig's server is %s, want the control-plane host's", cfg.Host)
	}
	edge := kubernetes.NewForConfigOrDie(cfg)
	for _, node := range []string{"control-plane-0", "workers-0", "workers-1"} {
		n, err := edge.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil || !ready(n) {
			t.Errorf("node %s of the managed cluster is not Ready: %v", node, err)
		}
	}
	inst := &ctrlv1.PluginInstallation{}
	poll(t, 3*time.Minute, "installation hello Ready on the managed cluster", func() (bool, string) {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hello"}, inst); err != nil {
			return false, err.Error()
		}
		return meta.IsStatusConditionTrue(inst.Status.Conditions, "Ready"), fmt.Sprint(inst.Status.Conditions)
	})
	cm, err := edge.CoreV1().ConfigMaps("default").Get(ctx, "hello", metav1.GetOptions{})
	if err != nil || cm.Data["greeting"] != "from-the-fleet" {
		t.Fatalf("the plugin's ConfigMap in the managed cluster: %v, %v", cm, err)
	}

	upgradeThroughResource(t, c, edge, mc)
	poll(t, 3*time.Minute, "installation hello moved to 2.0.0 on the upgraded cluster", func() (bool, string) {
		cm, err := edge.CoreV1().ConfigMaps("default").Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_ = c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hello"}, inst)
		return cm.Data["greeting"] == "from-the-fleet-2", fmt.Sprint(cm.Data, inst.Status.Conditions)
	})
	downgradeRefused(t, c, edge, mc)

	// Delete: the installation first (it uninstalls), then the cluster (down).
	if err := c.Delete(ctx, inst); err != nil {
		t.Fatal(err)
	}
	gone(t, c, inst, 2*time.Minute)
	if err := c.Get(ctx, client.ObjectKeyFromObject(mc), mc); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, mc); err != nil {
		t.Fatal(err)
	}
	gone(t, c, mc, 5*time.Minute)
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge-kubeconfig"}},
		&ctrlv1.TargetCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}},
	} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s is left after the ManagedCluster: %v", o, o.GetName(), err)
		}
	}
	cl := sshClients(t, addrs, key, known)
	for i := range addrs {
		got := cl.run(t, i, "for f in /usr/local/bin/kubeplug /usr/local/bin/containerd /usr/local/lib/kubeplug /usr/bin/kubelet /var/lib/kubeplug /var/lib/kubelet /etc/kubernetes /etc/systemd/system/kubelet.service /etc/systemd/system/containerd.service /etc/containerd; do if [ -e $f ] || [ -L $f ]; then echo left: $f; fi; done; systemctl list-units --all --no-legend 'kube*' 'containerd*'")
		got += cl.run(t, i, "pgrep -a -f '[c]ontainerd|[k]ubelet|[k]ube-|[e]tcd|[k]ubeplug' || true")
		if strings.TrimSpace(got) != "" {
			t.Errorf("host %s after the ManagedCluster was deleted:\n%s", addrs[i], got)
		}
	}
}

// machinesSay is a ManagedCluster's status.machines, one "name pool role
// address phase" per line.
func machinesSay(mc *ctrlv1.ManagedCluster) string {
	var b strings.Builder
	for _, m := range mc.Status.Machines {
		fmt.Fprintf(&b, "%s %s %s %s %s\n", m.Name, m.Pool, m.Role, m.Address, m.Phase)
	}
	return b.String()
}

// upgradeThroughResource changes a Ready ManagedCluster's spec:
//   - each machine is listed Ready, with its pool, role and address;
//   - spec.kubernetesVersion 1.38.0, which none of the controller's programs
//     (1.37.1, 1.36.3) are: Stalled, reason KubernetesVersionNotSupported,
//     naming the versions; no host touched (the Nodes stay Ready, the status
//     stays at 1.36.3);
//   - 1.37.1, with a pool file change (a label on the workers' pool): up
//     runs again through the resource and rolls every host, the control-plane
//     host first (its Node registered anew before the workers'), then the
//     workers one at a time; the ManagedCluster is Ready at 1.37.1 with every
//     machine Ready, every Node's kubelet and the API server's /version say
//     v1.37.1, and the label is on the workers' Nodes.
func upgradeThroughResource(t *testing.T, c client.Client, edge kubernetes.Interface, mc *ctrlv1.ManagedCluster) {
	t.Helper()
	ctx := t.Context()
	key := client.ObjectKeyFromObject(mc)
	if err := c.Get(ctx, key, mc); err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, 0, 3)
	for _, m := range mc.Status.Machines {
		addrs = append(addrs, m.Address)
	}
	if len(addrs) != 3 {
		t.Fatalf("status.machines:\n%s", machinesSay(mc))
	}
	if got, want := machinesSay(mc), fmt.Sprintf("control-plane-0 control-plane control-plane %s Ready\nworkers-0 workers worker %s Ready\nworkers-1 workers worker %s Ready\n", addrs[0], addrs[1], addrs[2]); got != want {
		t.Errorf("status.machines when Ready:\n%s\nwant\n%s", got, want)
	}
	versions(t, edge, "v1.36.3")
	file := mc.Spec.ClusterFile

	setClusterFile(t, c, mc, strings.Replace(file, "kubernetesVersion: 1.36.3", "kubernetesVersion: 1.38.0", 1))
	s := waitStalled(t, c, mc)
	if s.Reason != controller.ReasonVersionNotSupported || !strings.Contains(s.Message, "1.38.0") || !strings.Contains(s.Message, "are Kubernetes 1.37.1") || !strings.Contains(s.Message, "are Kubernetes 1.36.3") {
		t.Errorf("Stalled: %s: %s; want the refusal naming 1.38.0 and the programs' 1.37.1 and 1.36.3", s.Reason, s.Message)
	}
	if mc.Status.KubernetesVersion != "1.36.3" {
		t.Errorf("status.kubernetesVersion %s after a refused move, want 1.36.3", mc.Status.KubernetesVersion)
	}
	for _, node := range []string{"control-plane-0", "workers-0", "workers-1"} {
		if n, err := edge.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil || !ready(n) || n.Spec.Unschedulable {
			t.Errorf("node %s after a refused version move: %v", node, err)
		}
	}

	const label = "fleet.kubeplug.dev/pool"
	file = strings.Replace(file, "kubernetesVersion: 1.36.3", "kubernetesVersion: 1.37.1", 1)
	setClusterFile(t, c, mc, strings.Replace(file, "{name: workers, role: worker, count: 2}", "{name: workers, role: worker, count: 2, labels: {"+label+": upgraded}}", 1))
	began := time.Now()
	poll(t, 20*time.Minute, "ManagedCluster edge Ready at 1.37.1", func() (bool, string) {
		if err := c.Get(ctx, key, mc); err != nil {
			return false, err.Error()
		}
		r := meta.FindStatusCondition(mc.Status.Conditions, "Ready")
		return r != nil && r.Status == metav1.ConditionTrue && r.ObservedGeneration == mc.Generation && meta.FindStatusCondition(mc.Status.Conditions, "Stalled") == nil,
			fmt.Sprint(mc.Status.Conditions) + "\n" + machinesSay(mc)
	})
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("the upgrade 1.36.3 → 1.37.1 (control-plane host, then 2 workers) through the resource took %s (load %s)", time.Since(began).Round(time.Second), strings.TrimSpace(string(load)))
	if mc.Status.KubernetesVersion != "1.37.1" {
		t.Errorf("status.kubernetesVersion %s after the upgrade, want 1.37.1", mc.Status.KubernetesVersion)
	}
	if got := machinesSay(mc); strings.Count(got, " Ready\n") != 3 {
		t.Errorf("status.machines after the upgrade:\n%s", got)
	}
	created := versions(t, edge, "v1.37.1")
	// Each rolled host's Node is registered anew once the host is rolled.
	if !created["control-plane-0"].Before(created["workers-0"]) || !created["workers-0"].Before(created["workers-1"]) {
		t.Errorf("the Nodes were registered anew at %v: want the control-plane host first, then workers-0, then workers-1", created)
	}
	for _, node := range []string{"workers-0", "workers-1"} {
		n, err := edge.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Errorf("node %s after the upgrade: %v", node, err)
		} else if !ready(n) || n.Spec.Unschedulable || n.Labels[label] != "upgraded" {
			t.Errorf("node %s after the upgrade: Ready %v, unschedulable %v, labels %v", node, ready(n), n.Spec.Unschedulable, n.Labels)
		}
	}
}

// downgradeRefused sets a ManagedCluster at 1.37.1 back to 1.36.3, whose
// programs the controller has: Stalled, naming the downgrade; no host is
// touched (every kubelet still 1.37.1, the Nodes not registered anew).
func downgradeRefused(t *testing.T, c client.Client, edge kubernetes.Interface, mc *ctrlv1.ManagedCluster) {
	t.Helper()
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(mc), mc); err != nil {
		t.Fatal(err)
	}
	before := versions(t, edge, "v1.37.1")
	setClusterFile(t, c, mc, strings.Replace(mc.Spec.ClusterFile, "kubernetesVersion: 1.37.1", "kubernetesVersion: 1.36.3", 1))
	s := waitStalled(t, c, mc)
	t.Logf("Stalled: %s: %s", s.Reason, s.Message)
	if s.Reason != controller.ReasonVersionNotSupported || !strings.Contains(s.Message, "runs Kubernetes 1.37.1; a downgrade is not supported") {
		t.Errorf("Stalled: %s: %s; want the downgrade refused", s.Reason, s.Message)
	}
	if after := versions(t, edge, "v1.37.1"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a refused downgrade registered Nodes anew: %v, were %v", after, before)
	}
}

// setClusterFile sets a ManagedCluster's spec.clusterFile.
func setClusterFile(t *testing.T, c client.Client, mc *ctrlv1.ManagedCluster, text string) {
	t.Helper()
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(mc), mc); err != nil {
		t.Fatal(err)
	}
	mc.Spec.ClusterFile = text
	if err := c.Update(t.Context(), mc); err != nil {
		t.Fatal(err)
	}
}

// waitStalled waits until the ManagedCluster is Stalled at its generation.
func waitStalled(t *testing.T, c client.Client, mc *ctrlv1.ManagedCluster) *metav1.Condition {
	t.Helper()
	poll(t, 2*time.Minute, "ManagedCluster "+mc.Name+" Stalled", func() (bool, string) {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(mc), mc); err != nil {
			return false, err.Error()
		}
		s := meta.FindStatusCondition(mc.Status.Conditions, "Stalled")
		return s != nil && s.Status == metav1.ConditionTrue && s.ObservedGeneration == mc.Generation, fmt.Sprint(mc.Status.Conditions)
	})
	return meta.FindStatusCondition(mc.Status.Conditions, "Stalled")
}

// versions checks that every Node's kubelet and the API server (/version)
// are Kubernetes want, and returns when each Node was registered.
func versions(t *testing.T, edge kubernetes.Interface, want string) map[string]time.Time {
	t.Helper()
	info, err := edge.Discovery().ServerVersion()
	if err != nil || info.GitVersion != want {
		t.Errorf("the API server's /version: %v, %v; want %s", info, err, want)
	}
	nodes, err := edge.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := map[string]time.Time{}
	for _, n := range nodes.Items {
		created[n.Name] = n.CreationTimestamp.Time
		if v := n.Status.NodeInfo.KubeletVersion; v != want {
			t.Errorf("node %s: kubelet %s, want %s", n.Name, v, want)
		}
	}
	if len(created) != 3 {
		t.Errorf("the cluster's Nodes: %v, want 3", created)
	}
	return created
}

// applyCRDs applies the controller's CRDs and waits until they serve.
func applyCRDs(t *testing.T, rc *rest.Config) {
	t.Helper()
	dc := dynamic.NewForConfigOrDie(rc)
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, raw := range ctrlv1.CRDs() {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(u.Object)
		force := true
		if _, err := dc.Resource(crdGVR).Patch(t.Context(), u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "e2e", Force: &force}); err != nil {
			t.Fatalf("apply CRD %s: %v", u.GetName(), err)
		}
		poll(t, time.Minute, "CRD "+u.GetName()+" established", func() (bool, string) {
			got, err := dc.Resource(crdGVR).Get(t.Context(), u.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if m := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
					return true, ""
				}
			}
			return false, fmt.Sprint(conds)
		})
	}
}

// poll waits until cond holds, failing after timeout with its last word.
func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(time.Second)
	}
	t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, last)
}

// gone waits until o is deleted.
func gone(t *testing.T, c client.Client, o client.Object, timeout time.Duration) {
	t.Helper()
	poll(t, timeout, fmt.Sprintf("%T %s gone", o, o.GetName()), func() (bool, string) {
		err := c.Get(t.Context(), client.ObjectKeyFromObject(o), o)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		var conds []metav1.Condition
		switch x := o.(type) {
		case *ctrlv1.ManagedCluster:
			conds = x.Status.Conditions
		case *ctrlv1.PluginInstallation:
			conds = x.Status.Conditions
		}
		return false, fmt.Sprint(err, conds)
	})
}

// pluginArchive packs a plugin package.
func pluginArchive(t *testing.T, files map[string]string) []byte {
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
