package realnode

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
)

// The control plane's plugin for TestControlPlaneMachine: an API server flag
// and a file on the control-plane machine, both only through the rendered
// static Pod and cloud-init.
const cpPlugin = `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: audit, version: 0.1.0, description: an API server flag and a control-plane file}
spec:
  contributes:
    controlPlane:
      apiServer:
        flags: {event-ttl: 2h7m0s}
    nodes:
      - roles: [control-plane]
        files:
          - {path: /etc/audit/marker, mode: "0644", content: "on the control plane\n"}
`

const cpWorkload = `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: web, version: 0.1.0, description: a workload on the worker machine}
spec:
  contributes:
    kubernetes:
      manifests: [manifests/]
  validate:
    - name: available
      wait: {apiVersion: apps/v1, kind: Deployment, namespace: default, name: web, timeout: 3m}
`

const cpWorkloadManifests = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: app
          image: example.com/demo/app:v1
          args: [serve]
          ports: [{containerPort: 8080}]
          readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
`

func cpMachineCluster(plugins ...string) string {
	s := `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: cpmachine}
spec:
  kubernetesVersion: 1.37.1
  provider:
    local:
      machinePools: [control-plane, m]
  nodePools:
    - {name: m, role: worker, count: 1}
  plugins:
    sources: [{dir: ./plugins}]
    enabled:
      - name: control-plane
        values: {clusterCIDR: 10.247.0.0/16}
      - name: audit
`
	for _, p := range plugins {
		s += "      - name: " + p + "\n"
	}
	return s
}

// TestControlPlaneMachine brings up, through the CLI, a cluster whose control
// plane is a systemd machine booted from the control-plane pool's rendered
// cloud-init: etcd, the API server, the controller manager and the scheduler
// run as the static Pods `render` writes, under the machine's kubelet, from
// images of the cluster's own Kubernetes programs; a worker machine joins it by
// TLS bootstrap and runs a workload. A second up changes nothing; down leaves
// nothing.
func TestControlPlaneMachine(t *testing.T) {
	bin, _ := nodeBins(t)
	useMachineImage(t, bin)

	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	file := filepath.Join(dir, "cluster.yaml")
	write(t, filepath.Join(dir, "plugins", "audit", "plugin.yaml"), cpPlugin)
	write(t, filepath.Join(dir, "plugins", "web", "plugin.yaml"), cpWorkload)
	write(t, filepath.Join(dir, "plugins", "web", "manifests", "web.yaml"), cpWorkloadManifests)
	_, kp := cliFor(t, file, state, 10*time.Minute)
	id := realnode.ClusterID(state)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var out bytes.Buffer
		if code := cmd.Main(ctx, []string{"down", "-f", file, "--state-dir", state}, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &out}); code != 0 {
			t.Errorf("down exited %d:\n%s", code, out.String())
		}
		checkNothingLeft(t, state, id)
	})

	write(t, file, cpMachineCluster())
	out := kp("up")
	if !strings.Contains(out, "static Pods on machine control-plane-0") {
		t.Errorf("up did not say it booted the control-plane machine:\n%s", out)
	}
	kubeconfig := filepath.Join(state, "controlplane", "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// The API server is the machine's, at its address in the node network,
	// not a process of this host.
	if !strings.HasPrefix(cfg.Host, "https://10.250.") {
		t.Errorf("the kubeconfig's server is %s, want the machine's address", cfg.Host)
	}
	if pids, _ := filepath.Glob(filepath.Join(state, "controlplane", "*.pid")); len(pids) > 0 {
		t.Errorf("control-plane processes on the host: %v", pids)
	}
	client := clientFor(t, kubeconfig)
	ctx := context.Background()
	for _, comp := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		pod, err := client.CoreV1().Pods("kube-system").Get(ctx, comp+"-control-plane-0", metav1.GetOptions{})
		if err != nil {
			t.Errorf("the static Pod of %s has no mirror Pod: %v", comp, err)
			continue
		}
		if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; !mirror {
			t.Errorf("Pod %s is not a static Pod's mirror", pod.Name)
		}
		if pod.Status.Phase != corev1.PodRunning {
			t.Errorf("static Pod %s is %s", pod.Name, pod.Status.Phase)
		}
		if comp == "kube-apiserver" && !strings.Contains(strings.Join(pod.Spec.Containers[0].Command, " "), "--event-ttl=2h7m0s") {
			t.Errorf("the API server runs without the plugin's flag: %v", pod.Spec.Containers[0].Command)
		}
	}
	if got := inMachine(t, id, "control-plane-0", "cat", "/etc/audit/marker"); got != "on the control plane\n" {
		t.Errorf("the plugin's file on the control-plane machine = %q", got)
	}
	if got := inMachine(t, id, "control-plane-0", "sh", "-c", "ls /etc/kubernetes/manifests"); got != "etcd.yaml\nkube-apiserver.yaml\nkube-controller-manager.yaml\nkube-scheduler.yaml\n" {
		t.Errorf("static Pod manifests on the machine: %q", got)
	}
	for _, node := range []string{"control-plane-0", "m-0"} {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !ready(n) {
			t.Errorf("node %s is not Ready", node)
		}
	}
	cpNode, _ := client.CoreV1().Nodes().Get(ctx, "control-plane-0", metav1.GetOptions{})
	if cpNode == nil || len(cpNode.Spec.Taints) == 0 || cpNode.Spec.Taints[0].Key != "node-role.kubernetes.io/control-plane" {
		t.Errorf("the control-plane node is not tainted for the control plane: %+v", cpNode.Spec.Taints)
	}

	// A workload on the worker, which joined the machine's API server.
	kp("image", "load", demoAppArchive(t, dir))
	write(t, file, cpMachineCluster("web"))
	kp("up")
	pod := runningPod(t, client, "app=web")
	if pod.Spec.NodeName != "m-0" {
		t.Errorf("the workload runs on %s, want the worker m-0", pod.Spec.NodeName)
	}
	logs, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", kubeconfig, "logs", pod.Name).CombinedOutput()
	if err != nil || !strings.Contains(string(logs), "hello from "+pod.Name) {
		t.Errorf("kubectl logs %s: %v %s", pod.Name, err, logs)
	}

	// Again: nothing boots, the machine is the same instance.
	instance := inMachine(t, id, "control-plane-0", "cat", "/var/lib/cloud/data/instance-id")
	out = kp("up")
	if strings.Contains(out, "booting") {
		t.Errorf("a second up booted a machine:\n%s", out)
	}
	if got := inMachine(t, id, "control-plane-0", "cat", "/var/lib/cloud/data/instance-id"); got != instance {
		t.Errorf("the control-plane machine was replaced: %s, then %s", instance, got)
	}

	// Faults. kill -9 of the worker's kubelet: systemd starts it again and
	// the Node is Ready again, by itself.
	inMachine(t, id, "m-0", "systemctl", "kill", "--signal=KILL", "kubelet.service")
	waitFor(t, 2*time.Minute, "m-0's kubelet back and its Node Ready", func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, "m-0", metav1.GetOptions{})
		return err == nil && ready(n) && strings.TrimSpace(inMachine(t, id, "m-0", "sh", "-c", "systemctl is-active kubelet || true")) == "active"
	})
	// kill -9 of the control-plane machine's init: the machine is gone (its
	// supervisor ends); the next up boots it again, as the same instance,
	// with its etcd's data, and the cluster converges.
	root := runcRoot(t, id, "control-plane-0")
	if out, err := exec.Command("runc", "--root", root, "kill", "kp"+id+"-control-plane-0", "KILL").CombinedOutput(); err != nil {
		t.Fatalf("kill the control-plane machine's init: %v\n%s", err, out)
	}
	waitFor(t, time.Minute, "the control-plane machine to be gone", func() bool {
		out, _ := exec.Command("runc", "--root", root, "state", "kp"+id+"-control-plane-0").CombinedOutput()
		return !strings.Contains(string(out), `"running"`)
	})
	kp("up")
	if got := inMachine(t, id, "control-plane-0", "cat", "/var/lib/cloud/data/instance-id"); got != instance {
		t.Errorf("the control-plane machine came back as another instance: %s, then %s", instance, got)
	}
	if _, err := client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("the workload's Deployment is gone after the control plane's machine came back (etcd's data lost?): %v", err)
	}
}

// runcRoot is the runc root directory of the cluster's machine node.
func runcRoot(t *testing.T, id, node string) string {
	t.Helper()
	roots, _ := filepath.Glob("/run/kubeplug/" + id + "/*/runc")
	for _, root := range roots {
		if _, err := os.Stat(filepath.Join(root, "kp"+id+"-"+node)); err == nil {
			return root
		}
	}
	t.Fatalf("no runc root of machine %s (roots %v)", node, roots)
	return ""
}

// waitFor polls cond until it holds or timeout passes; a timeout names
// what, and what seen says was seen last.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool, seen ...func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			for _, s := range seen {
				what += " (last seen: " + s() + ")"
			}
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(time.Second)
	}
}
