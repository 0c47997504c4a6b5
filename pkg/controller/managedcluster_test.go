package controller_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/controller"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/hosts"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

var mclGVR = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "managedclusters"}

// fakeRunner stands for action.Up and action.Down: it fails the first ups
// and downs it is told to, checks what the controller gives it, and "brings
// up" the test's own API server.
type fakeRunner struct {
	kubeconfig []byte

	mu                 sync.Mutex
	ups, downs         []string
	failUps, failDowns int
	problems           []string
	acceptNew          bool
	// options are the provider options of the last up but the key policy.
	options             []string
	keyFile, knownHosts string
	// cas is the CA each up found in the state directory.
	cas []string
	// hold, when set, holds the next up after its hosts report "joining",
	// until the test closes it.
	hold chan struct{}
	// onUp, when set, is called first by each up: an error fails it before
	// any host (as the provider's refusal of a version), else it may change
	// what the up's kubeconfig reaches (the version it answers).
	onUp func(cl *config.Cluster) error
}

func (f *fakeRunner) check(cl *config.Cluster, run controller.ClusterRun) {
	hp := cl.Spec.Spec.Provider.Hosts
	if hp == nil {
		f.problems = append(f.problems, "not a hosts cluster")
		return
	}
	f.keyFile, f.knownHosts = hp.SSH.KeyFile, hp.KnownHostsFile
	if b, err := os.ReadFile(hp.SSH.KeyFile); err != nil || !strings.Contains(string(b), "TEST KEY") {
		f.problems = append(f.problems, fmt.Sprintf("key file %s: %q, %v", hp.SSH.KeyFile, b, err))
	}
	if !strings.HasPrefix(hp.KnownHostsFile, run.StateDir) {
		f.problems = append(f.problems, "known_hosts "+hp.KnownHostsFile+" is not in the state directory "+run.StateDir)
	}
	f.acceptNew = slices.ContainsFunc(run.Options, func(o provider.Option) bool { _, ok := o.(hosts.AcceptNewHostKeys); return ok })
	f.options = nil
	for _, o := range run.Options {
		if _, ok := o.(hosts.AcceptNewHostKeys); !ok {
			f.options = append(f.options, o.String())
		}
	}
}

func (f *fakeRunner) Up(_ context.Context, cl *config.Cluster, run controller.ClusterRun) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ups = append(f.ups, cl.Spec.Metadata.Name)
	f.check(cl, run)
	if f.onUp != nil {
		if err := f.onUp(cl); err != nil {
			return nil, err
		}
	}
	// The provider's state: a CA made by the first up, kept by the next.
	ca := filepath.Join(run.StateDir, "pki", "ca.crt")
	b, err := os.ReadFile(ca)
	f.cas = append(f.cas, string(b))
	if err != nil {
		_ = os.MkdirAll(filepath.Dir(ca), 0o700)
		_ = os.WriteFile(ca, fmt.Appendf(nil, "CA of up %d", len(f.ups)), 0o600)
	}
	// The hosts provider's progress, as pkg/provider/hosts words it.
	ev := func(node, msg string, done bool) {
		run.Events(provider.Event{Step: "node", Node: node, Item: node, Message: msg, Done: done})
	}
	for _, n := range []string{"control-plane-0", "workers-0", "workers-1"} {
		ev(n, "connecting to "+n, false)
		ev(n, "uploading /usr/local/bin/kubelet", false)
	}
	if f.failUps > 0 {
		f.failUps--
		ev("workers-1", "failed: host workers-1 (10.0.0.3:22): upload /usr/local/bin/kubelet: disk full", true)
		ev("control-plane-0", "Ready", true)
		ev("workers-0", "Ready", true)
		return nil, errors.New("stage provision: 1 host(s) failed: 10.0.0.3\n  host workers-1 (10.0.0.3:22): upload /usr/local/bin/kubelet: disk full")
	}
	ev("control-plane-0", "Ready", true)
	ev("workers-0", "joining", false)
	ev("workers-1", "joining", false)
	if hold := f.hold; hold != nil {
		f.hold = nil
		f.mu.Unlock()
		<-hold
		f.mu.Lock()
	}
	ev("workers-0", "Ready", true)
	ev("workers-1", "Ready", true)
	for _, n := range []string{"control-plane-0", "workers-0", "workers-1"} {
		ev(n, "connecting to "+n, false) // the afterDeploy hooks, after Ready
	}
	return f.kubeconfig, nil
}

func (f *fakeRunner) Down(_ context.Context, cl *config.Cluster, _ controller.ClusterRun) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.downs = append(f.downs, cl.Spec.Metadata.Name)
	if f.failDowns > 0 {
		f.failDowns--
		return errors.New("1 host(s) failed: 10.0.0.2\n  host workers-0 (10.0.0.2:22): remove kubeplug's files: connection refused")
	}
	return nil
}

func (f *fakeRunner) setFailDowns(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failDowns = n
}

func (f *fakeRunner) counts() (ups, downs int, problems []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ups), len(f.downs), slices.Clone(f.problems)
}

func hostsClusterFile(name, extraSSH string) string {
	return `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: ` + name + `}
spec:
  kubernetesVersion: 1.37.1
  provider:
    hosts:
      ssh: {user: kp` + extraSSH + `}
      pools:
        - name: control-plane
          hosts: [{address: 10.0.0.1}]
        - name: workers
          hosts: [{address: 10.0.0.2}, {address: 10.0.0.3}]
  nodePools:
    - {name: workers, role: worker, count: 2}
`
}

func startClusterController(t *testing.T, rc *rest.Config, runner controller.ClusterRunner, opts ...func(*controller.Options)) (stop func()) {
	t.Helper()
	o := controller.Options{
		Logger: testcluster.Logger(t), Action: &action.Config{NoBuiltin: true},
		MetricsAddr: "0", ProbeAddr: "0", WorkDir: t.TempDir(), DefaultInterval: time.Minute,
		LeaseIdle: 200 * time.Millisecond, TargetResync: 2 * time.Second,
		ClusterRunner: runner, ClusterRetry: time.Second,
	}
	for _, fn := range opts {
		fn(&o)
	}
	c, err := controller.New(rc, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("controller: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// conditionOf waits until a ManagedCluster's condition typ has status want,
// and returns its reason and message.
func conditionOf(t *testing.T, dc dynamic.Interface, ns, name, typ, want string) (reason, msg string) {
	t.Helper()
	waitFor(t, time.Minute, fmt.Sprintf("ManagedCluster %s %s=%s", name, typ, want), func() (bool, string) {
		u, err := dc.Resource(mclGVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var st string
		st, reason, msg = condition(u, typ)
		return st == want, st + " " + reason + ": " + msg
	})
	return reason, msg
}

// TestManagedClusterReconciler drives ManagedClusters through a fake
// provider run against the real API server: an up that fails naming host
// and step → Failed, retried → Ready, its kubeconfig in a Secret and a
// TargetCluster an installation targets by name; no second up for nothing;
// a provider not allowed and a cluster file naming a key file → refused
// before any up; delete → down (a failed down keeps the resource, Failed,
// and is retried), the Secret and TargetCluster gone.
func TestManagedClusterReconciler(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt, apps = "ctrl-mcluster", "ctrl-mcluster-apps"
	namespace(t, cs, mgmt)
	kc, err := os.ReadFile(testcluster.ControlPlane(t).KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	runner := &fakeRunner{kubeconfig: kc, failUps: 1 << 30}
	if _, err := cs.CoreV1().Secrets(mgmt).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hosts-key", Namespace: mgmt}, Type: corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{corev1.SSHAuthPrivateKey: []byte("TEST KEY")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	catalogConfigMap(t, cs, mgmt, "packages", catalogPackages(t, apps, "mc"))
	startClusterController(t, rc, runner)

	create(t, dc, mclGVR, mgmt, `apiVersion: kubeplug.dev/v1alpha1
kind: ManagedCluster
metadata: {name: edge}
spec:
  sshKeySecret: {name: hosts-key}
  acceptNewHostKeys: true
  clusterFile: |
`+indent(hostsClusterFile("edge", ""), "    "))
	reason, msg := conditionOf(t, dc, mgmt, "edge", "Failed", "True")
	if reason != controller.ReasonUpFailed || !strings.Contains(msg, "host workers-1 (10.0.0.3:22): upload") {
		t.Errorf("Failed: %s: %s; want the provider's error naming host and step", reason, msg)
	}
	// Each machine's phase, from the provider's events: the failed host at
	// its step.
	if got, want := machinesOf(t, dc, mgmt, "edge"), `control-plane-0 control-plane control-plane 10.0.0.1 Ready [Ready] []
workers-0 workers worker 10.0.0.2 Ready [Ready] []
workers-1 workers worker 10.0.0.3 Failed [uploading /usr/local/bin/kubelet] [host workers-1 (10.0.0.3:22): upload /usr/local/bin/kubelet: disk full]
`; got != want {
		t.Errorf("status.machines after a failed up:\n%s\nwant\n%s", got, want)
	}
	failed, _, _ := runner.counts()
	// The next up is held while its workers join: the status shows it.
	hold := make(chan struct{})
	runner.mu.Lock()
	runner.hold, runner.failUps = hold, 0
	runner.mu.Unlock()
	waitFor(t, time.Minute, "the workers Joining while up runs", func() (bool, string) {
		got := machinesOf(t, dc, mgmt, "edge")
		return strings.Contains(got, "workers-0 workers worker 10.0.0.2 Joining [joining] []") && strings.Contains(got, "workers-1 workers worker 10.0.0.3 Joining [joining] []"), got
	})
	close(hold)
	reason, msg = conditionOf(t, dc, mgmt, "edge", "Ready", "True")
	if reason != controller.ReasonProvisioned || !strings.Contains(msg, "Secret edge-kubeconfig") {
		t.Errorf("Ready: %s: %s", reason, msg)
	}
	if got, want := machinesOf(t, dc, mgmt, "edge"), `control-plane-0 control-plane control-plane 10.0.0.1 Ready [Ready] []
workers-0 workers worker 10.0.0.2 Ready [Ready] []
workers-1 workers worker 10.0.0.3 Ready [Ready] []
`; got != want {
		t.Errorf("status.machines when Ready:\n%s\nwant\n%s", got, want)
	}
	conditionOf(t, dc, mgmt, "edge", "Failed", "False")
	ups, _, problems := runner.counts()
	if ups != failed+1 || len(problems) > 0 || !runner.acceptNew {
		t.Errorf("%d ups, want %d (the failed ones and one more), acceptNewHostKeys %v, problems %v", ups, failed+1, runner.acceptNew, problems)
	}
	if sec, err := cs.CoreV1().Secrets(mgmt).Get(t.Context(), "edge-kubeconfig", metav1.GetOptions{}); err != nil || string(sec.Data["kubeconfig"]) != string(kc) {
		t.Fatalf("the kubeconfig Secret: %v", err)
	}
	readyAt(t, dc, tgtGVR, mgmt, "edge", 30*time.Second)

	// An installation targets the new cluster by the ManagedCluster's name.
	create(t, dc, catGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: main}, spec: {sources: [{configMap: packages}]}}`)
	create(t, dc, instGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: on-edge}, spec: {target: edge, catalogs: [main], plugins: [{name: mcapp, version: 1.0.0, values: {message: on-edge}}]}}`)
	readyAt(t, dc, instGVR, mgmt, "on-edge", 2*time.Minute)
	if data, err := message(t, cs, apps); err != nil || data["message"] != "on-edge" {
		t.Fatalf("app-settings in the managed cluster = %v, %v", data, err)
	}
	// Ready and unchanged: no second up, however often it reconciles.
	time.Sleep(3 * time.Second)
	if ups, _, _ := runner.counts(); ups != failed+1 {
		t.Errorf("%d ups: an unchanged Ready cluster was brought up again", ups)
	}

	// Refused before any up, each naming what to change.
	create(t, dc, mclGVR, mgmt, `apiVersion: kubeplug.dev/v1alpha1
kind: ManagedCluster
metadata: {name: onlocal}
spec:
  clusterFile: |
    apiVersion: kubeplug.dev/v1alpha1
    kind: Cluster
    metadata: {name: onlocal}
    spec:
      kubernetesVersion: 1.37.1
`)
	reason, msg = conditionOf(t, dc, mgmt, "onlocal", "Failed", "True")
	if reason != controller.ReasonProviderNotAllowed || !strings.Contains(msg, "spec.provider: the local provider may not be used") || !strings.Contains(msg, "--cluster-providers") {
		t.Errorf("a local cluster: %s: %s", reason, msg)
	}
	create(t, dc, mclGVR, mgmt, `apiVersion: kubeplug.dev/v1alpha1
kind: ManagedCluster
metadata: {name: keyfile}
spec:
  sshKeySecret: {name: hosts-key}
  clusterFile: |
`+indent(hostsClusterFile("keyfile", ", keyFile: /root/.ssh/id_ed25519"), "    "))
	reason, msg = conditionOf(t, dc, mgmt, "keyfile", "Failed", "True")
	if reason != controller.ReasonInvalidClusterFile || !strings.Contains(msg, "spec.provider.hosts.ssh: keyFile and agent") || !strings.Contains(msg, "spec.sshKeySecret") {
		t.Errorf("a cluster file with a key file: %s: %s", reason, msg)
	}
	create(t, dc, mclGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: ManagedCluster, metadata: {name: nocm}, spec: {clusterFileFrom: {name: missing, key: cluster.yaml}, sshKeySecret: {name: hosts-key}}}`)
	if reason, msg = conditionOf(t, dc, mgmt, "nocm", "Failed", "True"); !strings.Contains(msg, "spec.clusterFileFrom: ConfigMap missing") {
		t.Errorf("a missing ConfigMap: %s: %s", reason, msg)
	}
	// The API server refuses a ManagedCluster with no cluster file.
	if err := createErr(t, dc, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: ManagedCluster, metadata: {name: empty}, spec: {}}`); err == nil || !strings.Contains(err.Error(), "exactly one of clusterFile and clusterFileFrom") {
		t.Errorf("a ManagedCluster with no cluster file: %v", err)
	}
	if ups, _, _ := runner.counts(); ups != failed+1 {
		t.Errorf("%d ups: a refused cluster was brought up", ups)
	}
	for _, name := range []string{"onlocal", "keyfile", "nocm"} {
		deleted(t, dc, mgmt, name)
	}
	if _, downs, _ := runner.counts(); downs != 0 {
		t.Errorf("%d downs of clusters never brought up", downs)
	}

	// Delete: down fails (Failed, kept) until the hosts answer, then runs.
	runner.setFailDowns(1 << 30)
	if err := dc.Resource(instGVR).Namespace(mgmt).Delete(t.Context(), "on-edge", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dc.Resource(mclGVR).Namespace(mgmt).Delete(t.Context(), "edge", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if reason, msg = conditionOf(t, dc, mgmt, "edge", "Failed", "True"); reason != controller.ReasonDownFailed || !strings.Contains(msg, "host workers-0 (10.0.0.2:22): remove") {
		t.Errorf("a failed down: %s: %s", reason, msg)
	}
	runner.setFailDowns(0)
	deleted(t, dc, mgmt, "edge")
	if _, err := cs.CoreV1().Secrets(mgmt).Get(t.Context(), "edge-kubeconfig", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the kubeconfig Secret is left: %v", err)
	}
	if _, err := dc.Resource(tgtGVR).Namespace(mgmt).Get(t.Context(), "edge", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the TargetCluster is left: %v", err)
	}
	if _, err := os.Stat(runner.keyFile); !os.IsNotExist(err) {
		t.Errorf("the key file is left in the controller's state: %v", err)
	}
}

// machinesOf is a ManagedCluster's status.machines, as machinesLine.
func machinesOf(t *testing.T, dc dynamic.Interface, ns, name string) string {
	t.Helper()
	u, err := dc.Resource(mclGVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	var mc v1alpha1.ManagedCluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &mc); err != nil {
		t.Fatal(err)
	}
	return machinesLine(mc.Status.Machines)
}

// deleted deletes a ManagedCluster and waits until it is gone.
func deleted(t *testing.T, dc dynamic.Interface, ns, name string) {
	t.Helper()
	if err := dc.Resource(mclGVR).Namespace(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "ManagedCluster "+name+" gone", func() (bool, string) {
		_, err := dc.Resource(mclGVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

func createErr(t *testing.T, dc dynamic.Interface, ns, text string) error {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(text), &u.Object); err != nil {
		t.Fatal(err)
	}
	_, err := dc.Resource(mclGVR).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{})
	return err
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestManagedClusterStateSurvivesRestart: the cluster's state directory is
// kept in a Secret after each up; a controller that restarts with an empty
// work directory runs the next up on the same state (the same CA), and
// deleting the ManagedCluster deletes the Secret.
func TestManagedClusterStateSurvivesRestart(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt = "ctrl-mcstate"
	namespace(t, cs, mgmt)
	if _, err := cs.CoreV1().Secrets(mgmt).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hosts-key", Namespace: mgmt}, Type: corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{corev1.SSHAuthPrivateKey: []byte("TEST KEY")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc, err := os.ReadFile(testcluster.ControlPlane(t).KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	runner := &fakeRunner{kubeconfig: kc}
	stop := startClusterController(t, rc, runner)
	create(t, dc, mclGVR, mgmt, `apiVersion: kubeplug.dev/v1alpha1
kind: ManagedCluster
metadata: {name: kept}
spec:
  sshKeySecret: {name: hosts-key}
  clusterFile: |
`+indent(hostsClusterFile("kept", ""), "    "))
	conditionOf(t, dc, mgmt, "kept", "Ready", "True")
	if _, err := cs.CoreV1().Secrets(mgmt).Get(t.Context(), "kept-state", metav1.GetOptions{}); err != nil {
		t.Fatalf("the state Secret: %v", err)
	}
	stop()

	// A new controller, an empty work directory; a changed spec runs up again.
	startClusterController(t, rc, runner)
	edit(t, dc, mclGVR, mgmt, "kept", func(spec map[string]any) { spec["acceptNewHostKeys"] = true })
	waitFor(t, time.Minute, "a second up", func() (bool, string) {
		ups, _, _ := runner.counts()
		return ups == 2, fmt.Sprint(ups, " ups")
	})
	runner.mu.Lock()
	cas := slices.Clone(runner.cas)
	runner.mu.Unlock()
	if cas[0] != "" || cas[1] != "CA of up 1" {
		t.Errorf("the CAs the ups found: %q; want none, then the first up's", cas)
	}
	deleted(t, dc, mgmt, "kept")
	if _, err := cs.CoreV1().Secrets(mgmt).Get(t.Context(), "kept-state", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the state Secret is left: %v", err)
	}
}
