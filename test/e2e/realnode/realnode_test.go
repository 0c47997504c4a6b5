package realnode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
	"github.com/kubeplug/kubeplug/pkg/provider/nodeimage"
)

const plugin = `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata:
  name: demo
  version: 0.1.0
  description: a workload on a real node
spec:
  contributes:
    nodes:
      - kubelet:
          flags:
            max-pods: "42"
    kubernetes:
      manifests: [manifests/]
  validate:
    - name: available
      wait: {apiVersion: apps/v1, kind: Deployment, namespace: default, name: demo, timeout: 2m}
`

const manifests = `apiVersion: apps/v1
kind: Deployment
metadata: {name: demo, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}}
    spec:
      nodeSelector: {kubeplug.dev/pool: real}
      containers:
        - name: app
          # Any registry name: the node pulls every image through the cluster's registry.
          image: example.com/demo/app:v1
          args: [serve]
          ports: [{containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: demo, namespace: default}
spec:
  selector: {app: demo}
  ports: [{port: 80, targetPort: 8080}]
`

func cluster(plugins ...string) string {
	s := `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: realnode}
spec:
  kubernetesVersion: 1.37.1
  provider:
    local:
      realPools: [real]
  nodePools:
    - {name: sim, role: worker, count: 1}
    - {name: real, role: worker, count: 1}
  plugins:
    sources: [{dir: ./plugins}]
    enabled:
      - name: control-plane
        # Not the default Pod range, so that a quickstart running beside the
        # test keeps its routes.
        values: {clusterCIDR: 10.245.0.0/16}
`
	for _, p := range plugins {
		s += "      - name: " + p + "\n"
		if p == "metrics-server" {
			// The real kubelet's serving certificate is self-signed.
			s += "        values: {kubeletInsecureTLS: true}\n"
		}
		if p == "widgets-api" || p == "backup-operator" || p == "kubeplug-controller" {
			s += "        values: {nodeSelector: {kubeplug.dev/pool: real}}\n"
		}
	}
	return s
}

// TestRealNode brings a cluster with a real pool up through the CLI, pushes an
// image built from Go into its registry, deploys a plugin onto the real node and
// checks what only a real node does; then `down` must leave nothing.
func TestRealNode(t *testing.T) {
	bin, _ := nodeBins(t)
	images := os.Getenv("KUBEPLUG_IMAGES_BIN")
	if images == "" {
		images = filepath.Join(filepath.Dir(filepath.Dir(bin)), "images", "bin")
	}
	for _, b := range nodeimage.BuiltinImages {
		if _, err := os.Stat(filepath.Join(images, b.Binary)); err != nil && !b.OnDemand {
			t.Fatalf("the built-in images are not built (make images): %v", err)
		}
	}
	t.Setenv("KUBEPLUG_IMAGES_BIN", images)

	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	write(t, filepath.Join(dir, "plugins", "demo", "plugin.yaml"), plugin)
	write(t, filepath.Join(dir, "plugins", "demo", "manifests", "demo.yaml"), manifests)
	file := filepath.Join(dir, "cluster.yaml")
	kpCode, kp := cliFor(t, file, state, 5*time.Minute)
	id := realnode.ClusterID(state)
	t.Cleanup(func() {
		// Whatever happened above, nothing of the cluster may stay.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var out bytes.Buffer
		_ = cmd.Main(ctx, []string{"down", "-f", file, "--state-dir", state}, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &out})
		checkNothingLeft(t, state, id)
	})

	// Phase 1: the cluster with its registry; then the workload's image.
	write(t, file, cluster())
	kp("up")
	// The workload's image, built from Go without a daemon, loaded as a
	// docker-archive tarball through the CLI.
	archive := demoAppArchive(t, dir)
	if out := kp("image", "load", archive); !strings.Contains(out, "loaded example.com/demo/app:v1") {
		t.Fatalf("kubeplug image load printed %q", out)
	}
	// The example plugins that run servers: the widgets-api aggregated API server
	// and the backup-operator extension operator, their images from Go the same way.
	for _, ex := range []struct{ plugin, binary, pkg string }{
		{"widgets-api", "widgets-apiserver", "server"},
		{"backup-operator", "backup-operator", "operator"},
	} {
		copyDir(t, filepath.Join("..", "..", "..", "examples", "plugins", ex.plugin), filepath.Join(dir, "plugins", ex.plugin))
		img, err := nodeimage.BinaryImage(buildGo(t, dir, ex.binary, "github.com/kubeplug/kubeplug/examples/plugins/"+ex.plugin+"/"+ex.pkg))
		if err != nil {
			t.Fatal(err)
		}
		tag, _ := name.NewTag("kubeplug.dev/examples/" + ex.binary + ":0.1.0")
		if err := tarball.WriteToFile(filepath.Join(dir, ex.binary+".tar"), tag, img); err != nil {
			t.Fatal(err)
		}
		kp("image", "load", filepath.Join(dir, ex.binary+".tar"))
	}
	// kubeplug itself, for the built-in kubeplug-controller plugin, is not
	// loaded by hand: up pushes it from the images directory (make
	// controller-image, a prerequisite of make unit), as a user's up does.

	// Phase 2: the plugin, on the real node, with cluster DNS and metrics (their
	// images built from Go by make images, pushed by up).
	write(t, file, cluster("cluster-dns", "metrics-server", "demo", "widgets-api", "backup-operator", "kubeplug-controller"))
	kp("up") // its validate waited for the Backup's Ready condition, set by the operator
	kubeconfig := filepath.Join(state, "controlplane", "kubeconfig")
	client := clientFor(t, kubeconfig)
	ctx := context.Background()

	node, err := client.CoreV1().Nodes().Get(ctx, "real-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !ready(node) {
		t.Fatalf("node real-0 is not Ready: %+v", node.Status.Conditions)
	}
	if got := node.Status.Capacity.Pods().Value(); got != 42 {
		t.Errorf("node real-0 has capacity for %d pods, want 42 (the plugin's kubelet flag max-pods)", got)
	}
	if node.Labels["kubeplug.dev/pool"] != "real" {
		t.Errorf("node real-0 labels = %v, want the pool label", node.Labels)
	}
	pod := runningPod(t, client, "app=demo")
	if pod.Spec.NodeName != "real-0" {
		t.Fatalf("demo runs on %s, want real-0", pod.Spec.NodeName)
	}
	kubectl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// Running says the container started, not that it has written its first
	// line: on a loaded machine that can take a moment.
	var logs string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if logs = kubectl("logs", pod.Name); strings.Contains(logs, "hello from "+pod.Name) || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(logs, "hello from "+pod.Name) {
		t.Errorf("kubectl logs %s = %q after 30 s, want the workload's greeting", pod.Name, logs)
	}
	// The Pod's logs are the node's, below the state directory: in the host's
	// /var/log/pods, shared by every node of every cluster here, another
	// cluster's kubelet would remove them.
	podLogs := string(pod.Namespace) + "_" + pod.Name + "_" + string(pod.UID)
	if _, err := os.Stat(filepath.Join("/var/log/pods", podLogs)); err == nil {
		t.Errorf("the Pod's logs are in the host's /var/log/pods/%s", podLogs)
	}
	found := false
	_ = filepath.WalkDir(state, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == podLogs && filepath.Base(filepath.Dir(path)) == "pod-logs" {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	if !found {
		t.Errorf("the Pod's log directory %s is not below the state directory's pod-logs", podLogs)
	}
	if out := kubectl("exec", pod.Name, "--", "/app", "echo", "inside", "the", "container"); strings.TrimSpace(out) != "inside the container" {
		t.Errorf("kubectl exec printed %q", out)
	}
	svc, err := client.CoreV1().Services("default").Get(ctx, "demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A Pod reaches the Service (kube-proxy on the node), which reaches a Pod.
	var body string
	for range 30 {
		cmd := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", kubeconfig, "exec", pod.Name, "--", "/app", "get", "http://"+svc.Spec.ClusterIP)
		out, err := cmd.CombinedOutput()
		body = string(out)
		if err == nil {
			break
		}
		time.Sleep(time.Second)
	}
	if !strings.Contains(body, "served by "+pod.Name) {
		t.Errorf("GET of the demo Service from inside a Pod = %q", body)
	}
	// ... and by its name, through the cluster DNS.
	if out := kubectl("exec", pod.Name, "--", "/app", "get", "http://demo.default.svc.cluster.local"); !strings.Contains(out, "served by "+pod.Name) {
		t.Errorf("GET of the demo Service by name = %q", out)
	}
	// A Service of another plugin, by name: metrics-server's.
	if out := kubectl("exec", pod.Name, "--", "/app", "get", "https://metrics-server.kube-system.svc/livez"); strings.TrimSpace(out) != "ok" {
		t.Errorf("GET of metrics-server's /livez by its Service name = %q", out)
	}
	// kubectl top: metrics-server (built from Go) scrapes the real kubelet.
	var top string
	for range 90 {
		cmd := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", kubeconfig, "top", "node", "real-0", "--no-headers")
		out, err := cmd.CombinedOutput()
		top = string(out)
		if err == nil && strings.HasPrefix(top, "real-0") {
			break
		}
		time.Sleep(time.Second)
	}
	if f := strings.Fields(top); len(f) < 5 || !strings.HasPrefix(f[0], "real-0") || !strings.HasSuffix(f[1], "m") {
		t.Errorf("kubectl top node real-0 = %q, want its CPU and memory", top)
	}

	// The example's aggregated API, served from the real node through the
	// kube-apiserver (up waited for its APIService to be Available), with its
	// objects stored by the cluster's API server.
	if wp := runningPodIn(t, client, "widgets-system", "app=widgets-api"); wp.Spec.NodeName != "real-0" {
		t.Errorf("widgets-api runs on %s, want real-0", wp.Spec.NodeName)
	}
	write(t, filepath.Join(dir, "widget.yaml"), "apiVersion: widgets.example.com/v1alpha1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 7}\n")
	kubectl("create", "-f", filepath.Join(dir, "widget.yaml"), "--validate=false")
	if out := kubectl("get", "widgets", "-n", "default", "-o", "jsonpath={.items[*].spec.size}"); out != "7" {
		t.Errorf("kubectl get widgets = %q, want the widget created through the aggregated API", out)
	}
	if out := kubectl("get", "secrets", "-n", "widgets-system", "-l", "apiserver.sdk.kubeplug.dev/resource=widgets.widgets.example.com", "-o", "name"); !strings.Contains(out, "secret/") {
		t.Errorf("the widget is not stored by the cluster's API server: %q", out)
	}

	if op := runningPodIn(t, client, "backup-system", "app=backup-operator"); op.Spec.NodeName != "real-0" {
		t.Errorf("backup-operator runs on %s, want real-0", op.Spec.NodeName)
	}

	// kubeplug's controller, installed by kubeplug (the built-in plugin), runs on
	// the real node and installs a PluginInstallation from a ConfigMap catalog.
	if cp := runningPodIn(t, client, "kubeplug-system", "app.kubernetes.io/name=kubeplug-controller"); cp.Spec.NodeName != "real-0" {
		t.Errorf("kubeplug-controller runs on %s, want real-0", cp.Spec.NodeName)
	}
	write(t, filepath.Join(dir, "catalog", "hello", "plugin.yaml"), "apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: hello-ctrl, version: 1.0.0}\nspec:\n  contributes:\n    kubernetes: {manifests: [cm.yaml]}\n")
	write(t, filepath.Join(dir, "catalog", "hello", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hello-ctrl, namespace: default}\ndata: {message: '{{ .Values.message }}'}\n")
	var pkgOut bytes.Buffer
	if code := cmd.Main(ctx, []string{"plugin", "package", filepath.Join(dir, "catalog", "hello"), "-o", filepath.Join(dir, "hello.tgz")}, cmd.Streams{In: strings.NewReader(""), Out: &pkgOut, Err: &pkgOut}); code != 0 {
		t.Fatalf("kubeplug plugin package: %s", pkgOut.String())
	}
	kubectl("create", "namespace", "team-a")
	kubectl("-n", "team-a", "create", "configmap", "packages", "--from-file=hello.tgz="+filepath.Join(dir, "hello.tgz"))
	write(t, filepath.Join(dir, "installation.yaml"), `apiVersion: kubeplug.dev/v1alpha1
kind: PluginCatalog
metadata: {name: main, namespace: team-a}
spec: {sources: [{configMap: packages}]}
---
apiVersion: kubeplug.dev/v1alpha1
kind: PluginInstallation
metadata: {name: hello, namespace: team-a}
spec:
  catalogs: [main]
  plugins: [{name: hello-ctrl, values: {message: from the in-cluster controller}}]
`)
	kubectl("apply", "-f", filepath.Join(dir, "installation.yaml"))
	kubectl("-n", "team-a", "wait", "plugininstallation/hello", "--for=condition=Ready", "--timeout=2m")
	if out := kubectl("get", "configmap", "hello-ctrl", "-n", "default", "-o", "jsonpath={.data.message}"); out != "from the in-cluster controller" {
		t.Errorf("the in-cluster controller's installation: hello-ctrl message = %q", out)
	}
	kubectl("-n", "team-a", "delete", "plugininstallation/hello", "--timeout=2m")
	if out := kubectl("get", "configmap", "-n", "default", "--field-selector=metadata.name=hello-ctrl", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("after the installation was deleted, %q is still there", out)
	}

	// A container that dies is restarted by the kubelet.
	_ = kubectl("exec", pod.Name, "--", "/app", "get", "http://127.0.0.1:8080/exit")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p, err := client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount > 0 && p.Status.ContainerStatuses[0].Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the container was not restarted: %+v", p.Status.ContainerStatuses)
		}
		time.Sleep(time.Second)
	}

	// kill -9 of the kubelet: the next up brings it back.
	pidb, err := os.ReadFile(filepath.Join(state, "machines", "real-0", "node", "kubelet.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	_, _ = fmt.Sscan(string(pidb), &pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the kubelet: %v", err)
	}
	kp("up")
	if pidb2, _ := os.ReadFile(filepath.Join(state, "machines", "real-0", "node", "kubelet.pid")); string(pidb2) == string(pidb) {
		t.Error("up did not start a new kubelet after the old one was killed")
	}
	runningPod(t, client, "app=demo")

	// An image the registry does not have: up fails naming it, and converges
	// once the plugin is gone.
	write(t, filepath.Join(dir, "plugins", "missing", "plugin.yaml"), strings.NewReplacer("name: demo", "name: missing",
		"name: available", "name: runs", "name: demo, timeout: 2m", "name: missing, timeout: 2m").Replace(plugin))
	// example.com/missing/app:v1: never loaded.
	write(t, filepath.Join(dir, "plugins", "missing", "manifests", "missing.yaml"), strings.ReplaceAll(manifests, "demo", "missing"))
	write(t, file, cluster("cluster-dns", "metrics-server", "demo", "missing"))
	code, out := kpCode("up", "--timeout", "60s")
	if code == 0 || !strings.Contains(out, `example.com/missing/app:v1: not found`) || !strings.Contains(out, "ImagePull") {
		t.Errorf("up with an image the registry lacks: exit %d, want an error naming the image and the pull failure:\n%s", code, out)
	}
	write(t, file, cluster("cluster-dns", "metrics-server", "demo"))
	kp("up")
	// backup-operator is no longer enabled: its Backup went first, finalized by
	// the operator still running, then the operator, then the CRD — nothing is
	// left Terminating.
	if out, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", kubeconfig, "get", "crd", "backups.ops.example.com").CombinedOutput(); err == nil {
		t.Errorf("the CRD of an uninstalled operator plugin is left: %s", out)
	}
	for start := time.Now(); ; time.Sleep(time.Second) {
		out, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", kubeconfig, "get", "namespace", "backup-system", "-o", "jsonpath={.status}").CombinedOutput()
		if err != nil && strings.Contains(string(out), "NotFound") {
			break
		}
		if time.Since(start) > 90*time.Second {
			t.Errorf("namespace backup-system is stuck Terminating: %s", out)
			break
		}
	}
	// widgets-api is no longer enabled: uninstalled, its APIService first, so
	// discovery has nothing stale.
	if out, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", kubeconfig, "get", "apiservice", "v1alpha1.widgets.example.com").CombinedOutput(); err == nil {
		t.Errorf("the APIService of an uninstalled plugin is left: %s", out)
	}
	kubectl("get", "pods", "-A")

	kp("down")
	checkNothingLeft(t, state, id)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// buildGo builds a package as a static binary named name in dir.
func buildGo(t *testing.T, dir, name, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// copyDir copies a plugin directory (regular files only).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		write(t, filepath.Join(to, rel), string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// buildApp builds testdata/app as a static binary named app.
// demoAppArchive builds the demo workload (testdata/app) into an image tagged
// example.com/demo/app:v1, without a daemon, and writes it in dir as a
// docker-archive tarball for `kubeplug image load`; it returns the tarball.
func demoAppArchive(t *testing.T, dir string) string {
	t.Helper()
	img, err := nodeimage.BinaryImage(buildApp(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("example.com/demo/app:v1")
	archive := filepath.Join(dir, "app.tar")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		t.Fatal(err)
	}
	return archive
}

func buildApp(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "app")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/app")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the workload: %v\n%s", err, b)
	}
	return out
}

func clientFor(t *testing.T, kubeconfig string) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// runningPod waits for the one Pod of selector to run with its container ready.
func runningPod(t *testing.T, client *kubernetes.Clientset, selector string) *corev1.Pod {
	t.Helper()
	return runningPodIn(t, client, "default", selector)
}

func runningPodIn(t *testing.T, client *kubernetes.Clientset, ns, selector string) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		list, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err == nil && len(list.Items) == 1 {
			p := &list.Items[0]
			if p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running Pod for %s: %v %+v", selector, err, list)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkNothingLeft: no process, namespace, interface, nat chain, mount or cgroup
// of the cluster remains.
func checkNothingLeft(t *testing.T, state, id string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && (bytes.Contains(b, []byte(state)) || bytes.Contains(b, []byte("/run/kubeplug/"+id))) {
			t.Errorf("process left: %s", bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
	if m, _ := filepath.Glob("/run/netns/kp" + id + "-*"); len(m) > 0 {
		t.Errorf("network namespaces left: %v", m)
	}
	if m, _ := filepath.Glob("/sys/class/net/kp" + id + "*"); len(m) > 0 {
		t.Errorf("interfaces left: %v", m)
	}
	if out, _ := exec.Command("iptables", "-w", "-t", "nat", "-S").Output(); bytes.Contains(out, []byte("KP-"+strings.ToUpper(id))) {
		t.Errorf("nat rules left:\n%s", out)
	}
	for _, d := range []string{state, "/run/kubeplug/" + id} {
		if m, _ := realnode.MountsBelow(d); len(m) > 0 {
			t.Errorf("mounts left below %s: %v", d, m)
		}
	}
	if m, _ := filepath.Glob("/sys/fs/cgroup/*/kubeplug/" + id); len(m) > 0 {
		t.Errorf("cgroups left: %v", m)
	}
}
