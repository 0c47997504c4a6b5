package local_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/internal/k8sversions"
	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/nodeagent"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/local"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/pkg/render"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
`

// spec is what a test varies of the cluster.
type spec struct {
	workers      int
	admission    []string // the control-plane plugin's admissionPlugins
	failingPool  bool     // adds pool "bad" whose enforced beforeNodeup hook fails
	slowHook     string   // when set, workers' beforeNodeup hook "slow" runs this script
	bypassFailed bool     // adds a failing bypass hook to the workers
	hostWriter   string   // adds pool "rogue" whose beforeNodeup hook writes this host path
}

// alwaysPull enables AlwaysPullImages through the control-plane plugin's values,
// which own --enable-admission-plugins.
var alwaysPull = []string{"NodeRestriction", "AlwaysPullImages"}

func add(t *testing.T, m *model.Model, by string, c *model.Contribution) {
	t.Helper()
	if d := m.Add(by, c); d.HasFatal() {
		t.Fatalf("model add %s: %s", by, d)
	}
}

// desired is the state of a cluster with the test's plugins and the built-in
// control-plane plugin, whose flags are all the control plane gets, rendered
// with p's machine facts as `kubeplug up` does.
func desired(ctx context.Context, t *testing.T, p *local.Provider, s spec) *provider.Desired {
	t.Helper()
	facts, err := p.Facts() //nolint:contextcheck // provider.FactSource's Facts takes no context
	if err != nil {
		t.Fatal(err)
	}
	return desiredWith(ctx, t, facts, s)
}

// desiredWith is desired with the given machine facts.
func desiredWith(ctx context.Context, t *testing.T, facts map[string]any, s spec) *provider.Desired {
	t.Helper()
	version := builtVersion(t)
	m := coreModel(ctx, t, facts, version, s)
	flags := map[string]model.Setting[string]{
		"audit-policy-file": {Value: "/etc/kubernetes/audit/policy.yaml"},
		// Under the volume's mountPath: lands in its hostPath under the root.
		"audit-log-path": {Value: "/var/log/audit/audit.log"},
	}
	add(t, m, "audit", &model.Contribution{
		ControlPlane: &model.ControlPlane{Components: map[string]*model.Component{model.KubeAPIServer: {
			Flags:   flags,
			Volumes: map[string]model.Volume{"audit-log": {HostPath: "/var/log/kubernetes/audit", MountPath: "/var/log/audit"}},
		}}},
		Pools: map[string]*model.Pool{model.ControlPlanePool: {
			Files: map[string]model.File{"/etc/kubernetes/audit/policy.yaml": {Content: auditPolicy, Mode: "0600"}},
		}},
	})
	hooks := []model.Hook{
		{Name: "install", At: hookspec.PhaseBeforeNodeup, Script: "#!/bin/sh\necho \"$KUBEPLUG_NODE\" > \"$KUBEPLUG_ROOT/etc/mon/installed\"\n"},
		{Name: "check", At: hookspec.PhaseAfterNodeup, Command: []string{"sh", "-c", "touch \"$KUBEPLUG_ROOT/etc/mon/joined\""}},
		{Name: "register", At: hookspec.PhaseAfterDeploy, Command: []string{"sh", "-c", "touch \"$KUBEPLUG_ROOT/etc/mon/deployed\""}},
	}
	if s.slowHook != "" {
		hooks = append(hooks, model.Hook{Name: "slow", At: hookspec.PhaseBeforeNodeup, Script: s.slowHook})
	}
	if s.bypassFailed {
		hooks = append(hooks, model.Hook{Name: "optional", At: hookspec.PhaseAfterNodeup, Behavior: hookspec.BehaviorSyncBypass, Command: []string{"false"}})
	}
	add(t, m, "mon", &model.Contribution{Pools: map[string]*model.Pool{"workers": {
		Files: map[string]model.File{"/etc/mon/config.yaml": {Content: "level: info\n", Mode: "0640"}},
		Units: map[string]*model.Unit{"mon.service": {Content: "[Service]\nExecStart=/usr/bin/mon\n", Enable: true}},
		Kubelet: model.Kubelet{
			Labels: map[string]model.Setting[string]{"mon.example/enabled": {Value: "true"}},
			Taints: []model.Taint{{Key: "dedicated", Value: "mon", Effect: "NoSchedule"}},
		},
		Hooks: hooks,
	}}})
	if s.failingPool {
		add(t, m, "node-monitoring", &model.Contribution{Pools: map[string]*model.Pool{"bad": {
			Hooks: []model.Hook{{Name: "install", At: hookspec.PhaseBeforeNodeup, Script: "#!/bin/sh\necho disk full >&2\nexit 1\n"}},
		}}})
	}
	if s.hostWriter != "" {
		// A cloud machine's hook (kops-style: writing /etc, apt-get) on a
		// simulated node, which runs on this machine.
		add(t, m, "rogue", &model.Contribution{Pools: map[string]*model.Pool{"rogue": {
			Hooks: []model.Hook{{Name: "configure", At: hookspec.PhaseBeforeNodeup, Command: []string{"sh", "-c", "echo changed > " + s.hostWriter}}},
		}}})
	}
	in := render.Input{ClusterName: "test", KubernetesVersion: version, Model: m}
	machines, diags := render.Machines(ctx, in)
	if diags.HasFatal() {
		t.Fatalf("render machines: %s", diags)
	}
	return &provider.Desired{ClusterName: "test", KubernetesVersion: version, Model: m, Machines: machines}
}

// coreModel runs the initialise stage of a cluster file with s's pools and the
// built-in control-plane plugin, whose machine value is facts.
func coreModel(ctx context.Context, t *testing.T, facts map[string]any, version string, s spec) *model.Model {
	t.Helper()
	// Not the defaults, so that a provider that does not follow them shows.
	values := map[string]any{"machine": facts, "serviceClusterIPRange": "10.100.0.0/16", "clusterCIDR": "10.200.0.0/16"}
	if s.admission != nil {
		values["admissionPlugins"] = s.admission
	}
	pools := []map[string]any{{"name": "workers", "role": model.RoleWorker, "count": s.workers}}
	if s.failingPool {
		pools = append(pools, map[string]any{"name": "bad", "role": model.RoleWorker, "count": 1})
	}
	if s.hostWriter != "" {
		pools = append(pools, map[string]any{"name": "rogue", "role": model.RoleWorker, "count": 1})
	}
	cluster := map[string]any{
		"apiVersion": "kubeplug.dev/v1alpha1",
		"kind":       "Cluster",
		"metadata":   map[string]any{"name": "test"},
		"spec": map[string]any{
			"kubernetesVersion": version,
			"nodePools":         pools,
			"plugins": map[string]any{"enabled": []any{
				map[string]any{"name": "control-plane", "values": values},
			}},
		},
	}
	b, err := json.Marshal(cluster)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := action.NewRender(&action.Config{})
	r.Stage = stage.Initialise
	cl, l := config.Load(file)
	if cl == nil {
		t.Fatal(l)
	}
	files, fl := r.Files(ctx, cl)
	if l = append(l, fl...); l.HasFatal() {
		t.Fatalf("initialise %s: %s", file, l)
	}
	var m model.Model
	if err := json.Unmarshal(files["model.json"], &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

// otherFacts are the facts of a provider that is not the test's, for a test of
// a provider whose Facts fail.
func otherFacts(t *testing.T) map[string]any {
	t.Helper()
	facts, err := newProvider(t, filepath.Join(t.TempDir(), "other"), 0).Facts()
	if err != nil {
		t.Fatal(err)
	}
	return facts
}

// builtVersion is the Kubernetes version of the binaries `make localcluster` built.
func builtVersion(t *testing.T) string {
	t.Helper()
	v, err := controlplane.KubernetesVersion("")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func newProvider(t *testing.T, dir string, port int) *local.Provider {
	t.Helper()
	p, err := local.New(local.Options{
		StateDir:      dir,
		ClusterName:   "test",
		APIServerPort: port,
		Logger:        slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Events:        func(e provider.Event) { t.Logf("event %s %s: %s", e.Step, e.Node, e.Message) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// firstStart is when the component whose log is path was first started, as
// the log's first "=== kubeplug controlplane: starting BIN at TIME" line says.
func firstStart(t *testing.T, path string) time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "=== kubeplug controlplane: starting "); ok {
			_, at, _ := strings.Cut(strings.TrimSpace(rest), " at ")
			when, err := time.Parse(time.RFC3339Nano, at)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return when
		}
	}
	t.Fatalf("%s names no start", path)
	return time.Time{}
}

// recordedPIDs reads the control plane's pids from its state file.
func recordedPIDs(t *testing.T, dir string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "controlplane", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Components map[string]struct{ PID int } `json:"components"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, c := range st.Components {
		pids = append(pids, c.PID)
	}
	return pids
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	return !strings.HasPrefix(strings.TrimSpace(s[strings.LastIndexByte(s, ')')+1:]), "Z")
}

func caData(t *testing.T, kubeconfig string) []byte {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		return c.CertificateAuthorityData
	}
	t.Fatal("kubeconfig without cluster")
	return nil
}

// TestLifecycle walks one local cluster through up, a no-op up, a flag change,
// a pool change, a failing enforced hook, an interrupted up, down and up again.
func TestLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "state")
	p := newProvider(t, dir, 0)
	t.Cleanup(func() { _ = p.Down(context.Background(), false) })

	began := time.Now()
	cl, err := p.Up(ctx, desired(ctx, t, p, spec{workers: 2, bypassFailed: true}))
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	t.Logf("first up: %s", time.Since(began).Round(time.Millisecond))
	client := kubernetes.NewForConfigOrDie(cl.RESTConfig)
	if running, err := local.Running(ctx, dir); err != nil || !running {
		t.Fatalf("Running = %v, %v after up", running, err)
	}
	if cl.Kubeconfig != local.Kubeconfig(dir) || !cl.Started {
		t.Fatalf("cluster = %+v", cl)
	}

	t.Run("nodes joined with labels and taints", func(t *testing.T) {
		for _, name := range []string{"workers-0", "workers-1"} {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n.Labels["mon.example/enabled"] != "true" || n.Labels[local.PoolLabel] != "workers" {
				t.Errorf("node %s labels = %v", name, n.Labels)
			}
			if !slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == "dedicated" && tt.Value == "mon" }) {
				t.Errorf("node %s taints = %v", name, n.Spec.Taints)
			}
		}
		cpn, err := client.CoreV1().Nodes().Get(ctx, local.ControlPlaneNode, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := cpn.Labels[local.ControlPlaneRoleLabel]; !ok {
			t.Errorf("control-plane node labels = %v", cpn.Labels)
		}
		var ready int
		for _, ns := range cl.Nodes {
			if ns.Ready {
				ready++
			}
		}
		if ready != 3 {
			t.Errorf("ready nodes = %d of %+v", ready, cl.Nodes)
		}
	})

	t.Run("the processes run the rendered static Pods", func(t *testing.T) {
		checkRunsStaticPods(t, dir)
	})

	t.Run("the API server's certificate names the kubernetes Service", func(t *testing.T) {
		svc, err := client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "machines", local.ControlPlaneNode, "root", "etc/kubernetes/pki/apiserver.crt"))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(b)
		if block == nil {
			t.Fatal("apiserver.crt holds no PEM block")
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.ClusterIP != "10.100.0.1" || !slices.ContainsFunc(cert.IPAddresses, func(ip net.IP) bool { return ip.String() == svc.Spec.ClusterIP }) {
			t.Errorf("kubernetes Service at %s (want 10.100.0.1, the plugin's range); certificate names %v", svc.Spec.ClusterIP, cert.IPAddresses)
		}
	})

	t.Run("files and hooks under the node roots", func(t *testing.T) {
		root := filepath.Join(dir, "machines", "workers-1", "root")
		got, err := os.ReadFile(filepath.Join(root, "etc/mon/installed"))
		if err != nil || string(got) != "workers-1\n" {
			t.Errorf("beforeNodeup marker = %q, %v", got, err)
		}
		for _, f := range []string{"etc/mon/joined", "etc/systemd/system/mon.service", "etc/systemd/system/kubelet.service.d/10-kubeplug.conf", "etc/kubeplug/kubelet.env"} {
			if _, err := os.Stat(filepath.Join(root, f)); err != nil {
				t.Errorf("machine file: %v", err)
			}
		}
		if fi, err := os.Stat(filepath.Join(root, "etc/mon/config.yaml")); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("config.yaml: %v, %v", fi, err)
		}
		if _, err := os.Stat(filepath.Join(root, "etc/mon/deployed")); err == nil {
			t.Error("afterDeploy hook ran before AfterDeploy")
		}
		var rep nodeagent.Report
		b, err := os.ReadFile(filepath.Join(root, nodeagent.ReportsDir, hookspec.PhaseAfterNodeup+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Node != "workers-1" || len(rep.Hooks) != 2 {
			t.Errorf("afterNodeup report = %+v", rep)
		}
		// A new cluster's simulated workers run their beforeNodeup while the
		// control plane starts (issue 42), not after it is ready: before kwok,
		// started once the API server serves, started.
		var before nodeagent.Report
		if b, err := os.ReadFile(filepath.Join(root, nodeagent.ReportsDir, hookspec.PhaseBeforeNodeup+".json")); err != nil {
			t.Error(err)
		} else if err := json.Unmarshal(b, &before); err != nil {
			t.Error(err)
		}
		if kwokStarted := firstStart(t, filepath.Join(dir, "controlplane", "logs", "kwok.log")); !before.StartedAt.Before(kwokStarted) {
			t.Errorf("workers-1's beforeNodeup started at %s, kwok at %s: want the hooks while the control plane starts", before.StartedAt, kwokStarted)
		}
		// The bypass failure is reported, not fatal.
		for _, ns := range cl.Nodes {
			if ns.Pool == "workers" && ns.Hooks[hookspec.PhaseAfterNodeup].Failed != 1 {
				t.Errorf("node %s afterNodeup = %+v", ns.Name, ns.Hooks[hookspec.PhaseAfterNodeup])
			}
		}
		if err := p.AfterDeploy(ctx); err != nil {
			t.Fatalf("after deploy: %v", err)
		}
		if _, err := os.Stat(filepath.Join(root, "etc/mon/deployed")); err != nil {
			t.Errorf("afterDeploy hook: %v", err)
		}
	})

	t.Run("audit flags from a plugin write audit events", func(t *testing.T) {
		// The policy is the control-plane pool's node file; the log path lies under
		// the volume's mountPath, so it is written at the hostPath under the root.
		log := filepath.Join(dir, "machines", local.ControlPlaneNode, "root", "var/log/kubernetes/audit/audit.log")
		if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audited"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			b, _ := os.ReadFile(log)
			if bytes.Contains(b, []byte(`"name":"audited"`)) || bytes.Contains(b, []byte(`"resource":"configmaps"`)) && bytes.Contains(b, []byte("audited")) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no audit event for configmap audited in %s (%d bytes)", log, len(b))
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("second up changes nothing", func(t *testing.T) {
		began := time.Now()
		cl2, err := p.Up(ctx, desired(ctx, t, p, spec{workers: 2, bypassFailed: true}))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("no-op up: %s", time.Since(began).Round(time.Millisecond))
		if len(cl2.Restarted) != 0 || cl2.Started {
			t.Errorf("restarted %v, started %v", cl2.Restarted, cl2.Started)
		}
		for _, ns := range cl2.Nodes {
			for phase, s := range ns.Hooks {
				if s.Succeeded != 0 {
					t.Errorf("node %s %s re-ran hooks: %+v", ns.Name, phase, s)
				}
			}
		}
	})

	t.Run("an API server flag change restarts only the API server", func(t *testing.T) {
		pids := recordedPIDs(t, dir)
		cl3, err := p.Up(ctx, desired(ctx, t, p, spec{workers: 2, admission: alwaysPull}))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cl3.Restarted, []string{"kube-apiserver"}) {
			t.Fatalf("restarted = %v", cl3.Restarted)
		}
		after := recordedPIDs(t, dir)
		if same := len(slices.DeleteFunc(slices.Clone(after), func(p int) bool { return !slices.Contains(pids, p) })); same != len(pids)-1 {
			t.Errorf("pids before %v, after %v: want exactly one changed", pids, after)
		}
		// Behaviour: AlwaysPullImages rewrites every container's pull policy.
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pull", Namespace: "default"},
			Spec: corev1.PodSpec{
				Containers:  []corev1.Container{{Name: "c", Image: "example.com/app:1", ImagePullPolicy: corev1.PullIfNotPresent}},
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			},
		}
		var got *corev1.Pod
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err = client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
			if err == nil || time.Now().After(deadline) || apierrors.IsAlreadyExists(err) {
				break
			}
			time.Sleep(200 * time.Millisecond) // the restarted API server may still refuse
		}
		if err != nil {
			t.Fatal(err)
		}
		if pp := got.Spec.Containers[0].ImagePullPolicy; pp != corev1.PullAlways {
			t.Errorf("imagePullPolicy = %s, want Always from the AlwaysPullImages admission plugin", pp)
		}
	})

	t.Run("a shrunk pool loses its last node", func(t *testing.T) {
		cl, err := p.Up(ctx, desired(ctx, t, p, spec{workers: 1, admission: alwaysPull}))
		if err != nil {
			t.Fatal(err)
		}
		if len(cl.Restarted) != 0 {
			t.Errorf("restarted %v for a pool change", cl.Restarted)
		}
		if _, err := client.CoreV1().Nodes().Get(ctx, "workers-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("node workers-1 after shrink: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "machines", "workers-1")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("machine dir of workers-1: %v", err)
		}
	})

	t.Run("a simulated node's hook cannot write this machine", func(t *testing.T) {
		target := filepath.Join("/var/tmp", "kubeplug-rogue-"+filepath.Base(dir))
		t.Cleanup(func() { _ = os.Remove(target) })
		_, err := p.Up(ctx, desired(ctx, t, p, spec{workers: 1, hostWriter: target, admission: alwaysPull}))
		if !errors.Is(err, provider.ErrHookFailed) {
			t.Fatalf("up = %v, want ErrHookFailed", err)
		}
		for _, want := range []string{"node rogue-0: hook rogue/configure (beforeNodeup) failed", "Read-only file system"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q\nwant it to contain %q", err, want)
			}
		}
		if _, err := os.Stat(target); err == nil {
			t.Errorf("the hook of a simulated node wrote %s on this machine", target)
		}
	})

	t.Run("a failing enforced hook keeps its node out", func(t *testing.T) {
		_, err := p.Up(ctx, desired(ctx, t, p, spec{workers: 1, failingPool: true, admission: alwaysPull}))
		if !errors.Is(err, provider.ErrHookFailed) {
			t.Fatalf("up = %v, want ErrHookFailed", err)
		}
		want := "node bad-0: hook node-monitoring/install (beforeNodeup) failed: exit status 1: disk full"
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\nwant it to contain %q", err, want)
		}
		if _, err := client.CoreV1().Nodes().Get(ctx, "bad-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("node bad-0: %v, want not found", err)
		}
		// afterDeploy runs on the nodes that joined only.
		if err := p.AfterDeploy(ctx); err != nil {
			t.Fatalf("after deploy: %v", err)
		}
		report := filepath.Join(nodeagent.ReportsDir, hookspec.PhaseAfterDeploy+".json")
		if _, err := os.Stat(filepath.Join(dir, "machines", "bad-0", "root", report)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("afterDeploy report on bad-0: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "machines", "workers-0", "root", report)); err != nil {
			t.Errorf("afterDeploy report on workers-0: %v", err)
		}
	})

	t.Run("an interrupted up is continued by the next", func(t *testing.T) {
		root := filepath.Join(dir, "machines", "workers-0", "root")
		upCtx, upCancel := context.WithCancel(ctx)
		defer upCancel()
		go func() {
			for upCtx.Err() == nil {
				if _, err := os.Stat(filepath.Join(root, "slow-started")); err == nil {
					upCancel()
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		_, err := p.Up(upCtx, desired(ctx, t, p, spec{workers: 1, admission: alwaysPull, slowHook: "#!/bin/sh\ntouch \"$KUBEPLUG_ROOT/slow-started\"\nsleep 60\n"}))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted up = %v, want context.Canceled", err)
		}
		cl4, err := p.Up(ctx, desired(ctx, t, p, spec{workers: 1, admission: alwaysPull, slowHook: "#!/bin/sh\ntrue\n"}))
		if err != nil {
			t.Fatalf("up after interrupt: %v", err)
		}
		if s := cl4.Nodes[slices.IndexFunc(cl4.Nodes, func(n provider.NodeStatus) bool { return n.Name == "workers-0" })].Hooks[hookspec.PhaseBeforeNodeup]; s.Succeeded != 1 {
			t.Errorf("workers-0 beforeNodeup after interrupt = %+v, want the changed hook to run", s)
		}
	})

	t.Run("down, down again, up again on the same port and certificates", func(t *testing.T) {
		kc := local.Kubeconfig(dir)
		ca, host := caData(t, kc), cl.RESTConfig.Host
		pids := recordedPIDs(t, dir)
		if err := p.Down(ctx, false); err != nil {
			t.Fatalf("down: %v", err)
		}
		for _, pid := range pids {
			if alive(pid) {
				t.Errorf("process %d alive after down", pid)
			}
		}
		if running, err := local.Running(ctx, dir); err != nil || running {
			t.Errorf("Running after down = %v, %v", running, err)
		}
		if err := p.Down(ctx, false); !errors.Is(err, provider.ErrNotRunning) {
			t.Errorf("second down = %v, want ErrNotRunning", err)
		}
		cl5, err := p.Up(ctx, desired(ctx, t, p, spec{workers: 1}))
		if err != nil {
			t.Fatalf("up after down: %v", err)
		}
		if cl5.RESTConfig.Host != host || !bytes.Equal(caData(t, kc), ca) {
			t.Errorf("after down/up host %s (was %s), CA changed %v", cl5.RESTConfig.Host, host, !bytes.Equal(caData(t, kc), ca))
		}
		// etcd kept the cluster: the ConfigMap from before is still there.
		c5 := kubernetes.NewForConfigOrDie(cl5.RESTConfig)
		if _, err := c5.CoreV1().ConfigMaps("default").Get(ctx, "audited", metav1.GetOptions{}); err != nil {
			t.Errorf("configmap after down/up: %v", err)
		}
		if err := p.Down(ctx, true); err != nil {
			t.Fatalf("down --purge: %v", err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("state dir after purge: %v", err)
		}
	})
}

func TestPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	port := l.Addr().(*net.TCPAddr).Port
	dir := filepath.Join(t.TempDir(), "state")
	p := newProvider(t, dir, port)
	want := "port 127.0.0.1:" + strconv.Itoa(port) + " is in use by process " + strconv.Itoa(os.Getpid())
	// kubeplug up asks for the facts first: that is where the port is refused.
	if _, err := p.Facts(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("facts = %v\nwant an error containing %q", err, want)
	}
	_, err = p.Up(t.Context(), desiredWith(t.Context(), t, otherFacts(t), spec{workers: 1}))
	if err == nil {
		_ = p.Down(context.Background(), true)
		t.Fatal("up on a port in use succeeded")
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q\nwant it to contain %q", err, want)
	}
	if running, _ := local.Running(t.Context(), dir); running {
		t.Error("a control plane runs after the failed up")
	}
}

func TestIncompatibleState(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"provider state":      {"provider.json": `{"version": 99}`},
		"control plane state": {"provider.json": `{"version": 1, "clusterName": "test"}`, "controlplane/state.json": `{"version": 99}`},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			for f, content := range files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			p := newProvider(t, dir, 0)
			if _, err := p.Facts(); !errors.Is(err, provider.ErrIncompatibleState) || !strings.Contains(err.Error(), "kubeplug down --purge") {
				t.Errorf("facts = %v, want ErrIncompatibleState saying to purge", err)
			}
			_, err := p.Up(t.Context(), desiredWith(t.Context(), t, otherFacts(t), spec{workers: 1}))
			if !errors.Is(err, provider.ErrIncompatibleState) || !strings.Contains(err.Error(), "kubeplug down --purge") {
				t.Fatalf("up = %v, want ErrIncompatibleState saying to purge", err)
			}
			if err := p.Down(t.Context(), false); !errors.Is(err, provider.ErrIncompatibleState) {
				t.Errorf("down = %v, want ErrIncompatibleState", err)
			}
			if err := p.Down(t.Context(), true); err != nil {
				t.Errorf("down --purge = %v", err)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state dir after purge: %v", err)
			}
		})
	}
}

func TestDownNotRunning(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "keep")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, filepath.Join(dir, "never-created"), 0)
	if err := p.Down(t.Context(), false); !errors.Is(err, provider.ErrNotRunning) {
		t.Errorf("down = %v, want ErrNotRunning", err)
	}
	if err := p.Down(t.Context(), true); !errors.Is(err, provider.ErrNotRunning) {
		t.Errorf("down --purge = %v, want ErrNotRunning", err)
	}
	// A directory that is not kubeplug's is never purged nor used.
	p = newProvider(t, dir, 0)
	if err := p.Down(t.Context(), true); err == nil || !strings.Contains(err.Error(), "not a kubeplug state directory") {
		t.Errorf("purge of a foreign directory = %v", err)
	}
	if _, err := p.Up(t.Context(), desired(t.Context(), t, p, spec{workers: 1})); err == nil || !strings.Contains(err.Error(), "not a kubeplug state directory") {
		t.Errorf("up in a foreign directory = %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("foreign directory now holds %v", entries)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("file outside the state dir: %v", err)
	}
}

// TestUnsupportedVersion: a version versions.yaml does not name, patch releases
// included, is refused before anything is written, naming the ones it runs; so
// is a version it names whose binaries are not at hand.
func TestUnsupportedVersion(t *testing.T) {
	built := builtVersion(t)
	v, err := semver.StrictNewVersion(built)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{v.IncPatch().String(), v.IncMinor().String(), "1.30.0"} {
		t.Run(want, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			p := newProvider(t, dir, 0)
			d := desired(t.Context(), t, p, spec{workers: 1})
			d.KubernetesVersion = want
			_, err := p.Up(t.Context(), d)
			if !errors.Is(err, provider.ErrUnsupportedVersion) {
				t.Fatalf("up %s = %v, want ErrUnsupportedVersion", want, err)
			}
			for _, s := range []string{want, "runs Kubernetes ", built, "internal/k8sversions/versions.yaml"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state dir after a refused up: %v, want none", err)
			}
		})
	}
	// A version the table names, with a binary directory of another version
	// given: refused, naming both versions, never run instead.
	binDir, err := controlplane.FindBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range k8sversions.Default().Supported() {
		if other == built {
			continue
		}
		dir := filepath.Join(t.TempDir(), "state")
		p, err := local.New(local.Options{StateDir: dir, ClusterName: "test", BinDir: binDir, CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		d := desired(t.Context(), t, p, spec{workers: 1})
		d.KubernetesVersion = other
		if cl, err := p.Up(t.Context(), d); err == nil || cl != nil {
			_ = p.Down(context.Background(), true)
			t.Fatalf("up %s with binaries of %s = %v, want refused", other, built, err)
		}
		if err := p.CheckKubernetesVersion(other); !errors.Is(err, controlplane.ErrBinariesNotFound) ||
			!strings.Contains(err.Error(), "are Kubernetes "+built+", not "+other) {
			t.Errorf("check %s with binaries of %s = %v, want ErrBinariesNotFound naming both", other, built, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("state dir after a refused up: %v, want none", err)
		}
	}
	if err := newProvider(t, t.TempDir(), 0).CheckKubernetesVersion("v" + built); err != nil {
		t.Errorf("check v%s = %v, want accepted", built, err)
	}
}

// checkRunsStaticPods compares each control-plane process's arguments
// (/proc/PID/cmdline) with the command of its static Pod as rendered on the
// control-plane machine, after the documented rewriting: a flag value that is a
// clean absolute path is a path on the machine, mapped through the volume whose
// mountPath holds it (the longest) to its hostPath, then moved under the
// machine's root. Nothing else differs. The rendered files name key files, never
// hold keys.
func checkRunsStaticPods(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "controlplane", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Components map[string]struct{ PID int } `json:"components"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "machines", local.ControlPlaneNode, "root")
	for _, name := range model.Components {
		manifest, err := os.ReadFile(filepath.Join(root, "etc/kubernetes/manifests", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(manifest, []byte("PRIVATE KEY")) {
			t.Errorf("%s static Pod holds a key", name)
		}
		var pod corev1.Pod
		if err := sigsyaml.Unmarshal(manifest, &pod); err != nil {
			t.Fatal(err)
		}
		c := pod.Spec.Containers[0]
		mounts := map[string]string{}
		for _, v := range pod.Spec.Volumes {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name && v.HostPath != nil {
					mounts[m.MountPath] = v.HostPath.Path
				}
			}
		}
		var want []string
		for _, arg := range c.Command[1:] {
			flag, value, _ := strings.Cut(arg, "=")
			if strings.HasPrefix(value, "/") && filepath.Clean(value) == value && !strings.ContainsAny(value, ",= ") {
				host, best := value, ""
				for mp, hp := range mounts {
					if (value == mp || strings.HasPrefix(value, mp+"/")) && len(mp) > len(best) {
						host, best = filepath.Join(hp, strings.TrimPrefix(value, mp)), mp
					}
				}
				value = filepath.Join(root, host)
			}
			want = append(want, flag+"="+value)
		}
		pid := st.Components[name].PID
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			t.Fatalf("%s (pid %d): %v", name, pid, err)
		}
		got := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		if filepath.Base(got[0]) != name || !slices.Equal(got[1:], want) {
			t.Errorf("%s runs\n  %q\nits static Pod says (under the root)\n  %q", name, got, want)
		}
		// The provider adds nothing: even the port and the certificate come from
		// the static Pod.
		provided := []string{"--secure-port=", "--tls-cert-file=" + filepath.Join(root, "etc/kubernetes/pki") + "/"}
		if name == model.Etcd {
			provided = []string{"--listen-client-urls=http://127.0.0.1:", "--data-dir=" + filepath.Join(root, "var/lib/etcd")}
		}
		for _, flag := range provided {
			if !slices.ContainsFunc(want, func(a string) bool { return strings.HasPrefix(a, flag) }) {
				t.Errorf("%s static Pod has no %s...: %q", name, flag, want)
			}
		}
	}
}
