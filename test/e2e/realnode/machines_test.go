package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
)

// The machines' plugin: a kubelet flag, a label and a taint, a node file, a
// systemd unit and a beforeNodeup hook — everything reaches the machines
// only through the pool's rendered cloud-init.
const machinesPlugin = `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: fleet, version: 0.1.0, description: what the machines get}
spec:
  contributes:
    controlPlane:
      apiServer:
        flags: {event-ttl: 2h7m0s}
    nodes:
      - roles: [worker]
        files:
          - {path: /etc/fleet/greeting, mode: "0644", content: "GREETING\n"}
        systemdUnits:
          - name: fleet-marker.service
            enable: true
            content: |
              [Unit]
              Description=fleet marker
              [Service]
              Type=oneshot
              RemainAfterExit=yes
              ExecStart=/bin/sh -c 'cat /etc/fleet/greeting > /var/lib/fleet-marker'
              [Install]
              WantedBy=multi-user.target
        kubelet:
          flags: {max-pods: "42"}
          labels: {fleet.kubeplug.dev/machine: "yes"}
          taints: [{key: fleet.kubeplug.dev/dedicated, value: "yes", effect: NoSchedule}]
        hooks:
          - name: hello
            at: beforeNodeup
            run:
              command: [/bin/sh, -c, 'echo "fleet hook ran on $(hostname)"; touch /var/lib/fleet-hook-ran']
            timeout: 30s
`

// The workload: two replicas, one per machine, kept available by a budget.
const machinesWorkload = `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: web, version: 0.1.0, description: a workload on the machines}
spec:
  contributes:
    kubernetes:
      manifests: [manifests/]
  validate:
    - name: available
      wait: {apiVersion: apps/v1, kind: Deployment, namespace: default, name: web, timeout: 3m}
`

const machinesManifests = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {fleet.kubeplug.dev/machine: "yes"}
      tolerations: [{key: fleet.kubeplug.dev/dedicated, operator: Exists}]
      topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: web}}}
      containers:
        - name: app
          image: example.com/demo/app:v1
          args: [serve]
          ports: [{containerPort: 8080}]
          readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
`

func machinesCluster(plugins ...string) string {
	s := `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: machines}
spec:
  kubernetesVersion: 1.37.1
  provider:
    local:
      machinePools: [control-plane, m]
  nodePools:
    - {name: m, role: worker, count: 2}
  plugins:
    sources: [{dir: ./plugins}]
    enabled:
      - name: control-plane
        # Not the default Pod range, so that a quickstart running beside the
        # test keeps its routes.
        values: {clusterCIDR: 10.246.0.0/16}
      - name: fleet
`
	for _, p := range plugins {
		s += "      - name: " + p + "\n"
	}
	return s
}

// inMachine runs argv inside the cluster's machine node through runc, as an
// operator would with a shell on it.
func inMachine(t *testing.T, id, node string, argv ...string) string {
	t.Helper()
	out, err := machineExec(id, node, argv...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// machineExec runs argv in the machine of node, returning its output, or an
// error naming the machine, the command and its output.
func machineExec(id, node string, argv ...string) (string, error) {
	roots, _ := filepath.Glob("/run/kubeplug/" + id + "/*/runc")
	for _, root := range roots {
		if _, err := os.Stat(filepath.Join(root, "kp"+id+"-"+node)); err != nil {
			continue
		}
		out, err := exec.Command("runc", append([]string{"--root", root, "exec", "kp" + id + "-" + node}, argv...)...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("in machine %s: %s: %w\n%s", node, strings.Join(argv, " "), err, out)
		}
		return string(out), nil
	}
	return "", fmt.Errorf("no running machine %s (runc roots %v)", node, roots)
}

// TestMachines brings up, through the CLI, a cluster whose every node is a
// systemd machine booted from its pool's rendered cloud-init (one control-plane
// machine running the static Pods, two workers); checks what the plugins put
// on them from inside the machines, a workload with logs and exec, a rolling
// replacement when the pool's files change, and that `down` leaves nothing.
func TestMachines(t *testing.T) {
	bin, _ := nodeBins(t)
	useMachineImage(t, bin)

	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	file := filepath.Join(dir, "cluster.yaml")
	write(t, filepath.Join(dir, "plugins", "fleet", "plugin.yaml"), strings.Replace(machinesPlugin, "GREETING", "hello machine", 1))
	write(t, filepath.Join(dir, "plugins", "web", "plugin.yaml"), machinesWorkload)
	write(t, filepath.Join(dir, "plugins", "web", "manifests", "web.yaml"), machinesManifests)
	kpCode, kp := cliFor(t, file, state, 8*time.Minute)
	id := realnode.ClusterID(state)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var out bytes.Buffer
		_ = cmd.Main(ctx, []string{"down", "-f", file, "--state-dir", state}, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &out})
		checkNothingLeft(t, state, id)
		if out, _ := exec.Command("sh", "-c", "grep -c '"+state+"' /proc/mounts").Output(); strings.TrimSpace(string(out)) != "0" {
			t.Errorf("mounts of the machines left: %s", out)
		}
	})

	// Phase 1: the machines boot and join; then the workload's image.
	write(t, file, machinesCluster())
	kp("up")
	kp("image", "load", demoAppArchive(t, dir))

	kubeconfig := filepath.Join(state, "controlplane", "kubeconfig")
	client := clientFor(t, kubeconfig)
	ctx := context.Background()
	for _, node := range []string{"m-0", "m-1"} {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !ready(n) {
			t.Errorf("node %s is not Ready", node)
		}
		if got := n.Status.Capacity.Pods().Value(); got != 42 {
			t.Errorf("node %s has capacity for %d pods, want 42 (the plugin's kubelet flag)", node, got)
		}
		if n.Labels["fleet.kubeplug.dev/machine"] != "yes" || len(n.Spec.Taints) == 0 || n.Spec.Taints[0].Key != "fleet.kubeplug.dev/dedicated" {
			t.Errorf("node %s: labels %v taints %v, want the plugin's", node, n.Labels, n.Spec.Taints)
		}
		// Through the machine, not the state directory.
		if got := inMachine(t, id, node, "cat", "/etc/fleet/greeting", "/var/lib/fleet-marker"); got != "hello machine\nhello machine\n" {
			t.Errorf("machine %s: node file and unit's output = %q", node, got)
		}
		if got := inMachine(t, id, node, "journalctl", "-u", "kubeplug-boot.service", "--no-pager"); !strings.Contains(got, "fleet hook ran on "+node) {
			t.Errorf("machine %s: the hook's output is not in its journal:\n%s", node, got)
		}
		if got := inMachine(t, id, node, "sh", "-c", "systemctl is-active kubelet containerd kube-proxy"); got != "active\nactive\nactive\n" {
			t.Errorf("machine %s: kubelet, containerd, kube-proxy = %q", node, got)
		}
	}
	// The control plane runs in its machine, with the plugin's flag: as the
	// machine's own processes show it.
	if got := inMachine(t, id, "control-plane-0", "sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '"); !strings.Contains(got, "kube-apiserver ") || !strings.Contains(got, "--event-ttl=2h7m0s") {
		t.Errorf("no kube-apiserver with the plugin's --event-ttl among the control-plane machine's processes:\n%.2000s", got)
	}
	// The hook ran in the machines, not here.
	if _, err := os.Stat("/var/lib/fleet-hook-ran"); err == nil {
		t.Error("the hook wrote the host's /var/lib")
	}
	// The kubelets joined through the TLS bootstrap: their client CSRs were
	// approved by the controller manager.
	csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	approved := 0
	for _, c := range csrs.Items {
		if strings.HasPrefix(c.Spec.Username, "system:bootstrap:") && len(c.Status.Certificate) > 0 {
			approved++
		}
	}
	if approved < 2 {
		t.Errorf("%d bootstrap CSRs issued, want one per machine", approved)
	}

	// Phase 2: the workload on the machines, logs and exec.
	write(t, file, machinesCluster("web"))
	kp("up")
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("web Pods: %v %d", err, len(pods.Items))
	}
	for _, pod := range pods.Items {
		if !strings.HasPrefix(pod.Spec.NodeName, "m-") {
			t.Errorf("Pod %s runs on %s, want a machine", pod.Name, pod.Spec.NodeName)
		}
		var logs string
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			if logs = kubectl("logs", pod.Name); strings.Contains(logs, "hello from "+pod.Name) || time.Now().After(deadline) {
				break
			}
		}
		if !strings.Contains(logs, "hello from "+pod.Name) {
			t.Errorf("kubectl logs %s = %q", pod.Name, logs)
		}
		if out := kubectl("exec", pod.Name, "--", "/app", "echo", "inside"); strings.TrimSpace(out) != "inside" {
			t.Errorf("kubectl exec %s printed %q", pod.Name, out)
		}
	}

	// Phase 3: a changed pool file replaces the machines one at a time; the
	// workload stays available throughout.
	before := map[string]string{}
	for _, node := range []string{"m-0", "m-1"} {
		before[node] = inMachine(t, id, node, "cat", "/var/lib/cloud/data/instance-id")
	}
	write(t, filepath.Join(dir, "plugins", "fleet", "plugin.yaml"), strings.Replace(machinesPlugin, "GREETING", "hello again", 1))
	var (
		stop        atomic.Bool
		wg          sync.WaitGroup
		unavailable atomic.Int32
		bothDown    atomic.Int32
	)
	wg.Go(func() {
		for !stop.Load() {
			d, err := client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
			if err == nil && d.Status.AvailableReplicas < 1 {
				unavailable.Add(1)
			}
			nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "kubeplug.dev/pool=m"})
			if err == nil {
				notReady := 2 - len(nodes.Items)
				for i := range nodes.Items {
					if !ready(&nodes.Items[i]) || nodes.Items[i].Spec.Unschedulable {
						notReady++
					}
				}
				if notReady >= 2 {
					bothDown.Add(1)
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	out := kp("up")
	stop.Store(true)
	wg.Wait()
	if n := unavailable.Load(); n > 0 {
		t.Errorf("the workload had no available replica %d times during the roll", n)
	}
	if n := bothDown.Load(); n > 0 {
		t.Errorf("both machines were out of service at once %d times: the roll is not one at a time", n)
	}
	if strings.Count(out, "replacing it") != 2 {
		t.Errorf("up did not say it replaced both machines:\n%s", out)
	}
	for _, node := range []string{"m-0", "m-1"} {
		if got := inMachine(t, id, node, "cat", "/var/lib/cloud/data/instance-id"); got == before[node] {
			t.Errorf("machine %s was not replaced (instance %s)", node, got)
		}
		if got := inMachine(t, id, node, "cat", "/etc/fleet/greeting"); got != "hello again\n" {
			t.Errorf("machine %s after the roll: greeting %q", node, got)
		}
	}

	// Phase 4: a machine whose enforced hook fails inside it fails up, naming
	// the machine, the plugin, the hook and the phase; its kubelet never
	// starts, and the other machines are untouched.
	write(t, filepath.Join(dir, "plugins", "broken", "plugin.yaml"), `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: broken, version: 0.1.0, description: a hook that fails}
spec:
  contributes:
    nodes:
      - pools: [bad]
        hooks:
          - name: fail
            at: beforeNodeup
            run: {command: [/bin/sh, -c, 'echo disk full >&2; exit 3']}
`)
	write(t, file, strings.Replace(strings.Replace(machinesCluster("web", "broken"), "machinePools: [control-plane, m]", "machinePools: [control-plane, m, bad]", 1),
		"    - {name: m, role: worker, count: 2}\n", "    - {name: m, role: worker, count: 2}\n    - {name: bad, role: worker, count: 1}\n", 1))
	code, out := kpCode("up")
	if code == 0 {
		t.Fatalf("up with a failing hook in a machine succeeded:\n%s", out)
	}
	for _, want := range []string{"node bad-0", "hook broken/fail (beforeNodeup) failed", "disk full"} {
		if !strings.Contains(out, want) {
			t.Errorf("up's output lacks %q:\n%s", want, out)
		}
	}
	if got := inMachine(t, id, "bad-0", "sh", "-c", "systemctl is-active kubelet || true"); strings.TrimSpace(got) == "active" {
		t.Error("the kubelet of the failed machine runs")
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, "bad-0", metav1.GetOptions{}); err == nil {
		t.Error("the failed machine joined")
	}
	if got := inMachine(t, id, "m-0", "cat", "/var/lib/cloud/data/instance-id"); got == before["m-0"] {
		t.Error("m-0 is the instance from before the roll")
	}

	// The state records each node as a machine.
	var st struct {
		Nodes []struct {
			Name    string `json:"name"`
			Machine bool   `json:"machine"`
		} `json:"nodes"`
	}
	b, err := os.ReadFile(filepath.Join(state, "provider.json"))
	if err == nil {
		_ = json.Unmarshal(b, &st)
	}
	machines := 0
	for _, n := range st.Nodes {
		if n.Machine {
			machines++
		}
	}
	if machines != 4 {
		t.Errorf("state records %d machines, want 4: the control plane's, m-0, m-1, bad-0 (%s)", machines, b)
	}
}
