package hosts

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	_ "github.com/kubeplug/kubeplug/pkg/provider/all"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
)

// A plugin whose effects are checked on the hosts: a file and a unit on the
// workers, a label on their Nodes, an API server flag.
const fleetPlugin = `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: fleet, version: 0.1.0, description: "node files, a unit, a label and an API server flag"}
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
          labels: {fleet.kubeplug.dev/host: "yes"}
          # The test hosts' disk is this machine's, shared and nearly full.
          flags: {eviction-hard: "memory.available<100Mi,nodefs.available<1%,imagefs.available<1%", image-gc-high-threshold: "100", image-gc-low-threshold: "99"}
`

const webPlugin = `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: web, version: 0.1.0, description: a workload on the hosts}
spec:
  contributes:
    kubernetes:
      manifests: [manifests/]
  validate:
    - name: available
      wait: {apiVersion: apps/v1, kind: Deployment, namespace: default, name: web, timeout: 3m}
`

const webManifests = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {fleet.kubeplug.dev/host: "yes"}
      containers:
        - name: app
          image: registry.k8s.io/e2e-test-images/agnhost:2.66.1
          args: [netexec, --http-port=8080]
          readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
`

func clusterFile(key, known string, addrs []string) string {
	return fmt.Sprintf(`apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: onhosts}
spec:
  kubernetesVersion: 1.37.1
  provider:
    hosts:
      ssh: {user: %s, keyFile: %s}
      knownHostsFile: %s
      pools:
        - name: control-plane
          hosts: [{address: %s}]
        - name: workers
          hosts: [{address: %s}, {address: %s}]
  nodePools:
    - {name: workers, role: worker, count: 2}
  plugins:
    sources: [{dir: ./plugins}]
    enabled:
      - name: control-plane
        values: {clusterCIDR: 10.246.0.0/16}
      - name: fleet
      - name: web
`, sshUser, key, known, addrs[0], addrs[1], addrs[2])
}

// TestCluster: three sshd machines as foreign hosts (1 control plane, 2
// workers); `kubeplug up` builds the cluster on them over SSH: the control
// plane as the rendered static Pods under the first host's kubelet, the
// workers joining by bootstrap token. The plugin's file, unit, label and API
// server flag are in effect on the hosts (checked over SSH); the workload
// runs; a re-run uploads nothing. Faults: sshd stopped on a worker fails the
// run naming its address while the others finish, and a re-run after it is
// started converges; a changed host key is refused naming its fingerprint.
// down leaves no kubeplug file, unit or process on the hosts.
func TestCluster(t *testing.T) {
	requireHostsE2E(t)
	// The hosts get the node programs from the built components: the
	// environment's, else the repository's _output (as the realnode tests).
	bin, err := controlplane.FindBinDir("")
	if err != nil {
		t.Fatalf("the local control plane is not built (make localcluster): %v", err)
	}
	nodeBin := os.Getenv("KUBEPLUG_LOCALNODE_BIN")
	if nodeBin == "" {
		nodeBin = filepath.Join(filepath.Dir(filepath.Dir(bin)), "localnode", "bin")
	}
	if _, err := os.Stat(filepath.Join(nodeBin, "containerd")); err != nil {
		t.Fatalf("the node programs are not built (make localnode): %v", err)
	}
	t.Setenv("KUBEPLUG_LOCALCLUSTER_BIN", bin)
	t.Setenv("KUBEPLUG_LOCALNODE_BIN", nodeBin)
	dir := t.TempDir()
	if os.Getenv("KUBEPLUG_NODE_AGENT") == "" {
		agent := filepath.Join(dir, "kubeplug")
		cmd := exec.Command("go", "build", "-o", agent, "github.com/kubeplug/kubeplug/cmd/kubeplug")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build the node agent: %v\n%s", err, out)
		}
		t.Setenv("KUBEPLUG_NODE_AGENT", agent)
	}
	ms, key := sshHosts(t, 3)
	var addrs []string
	for i, m := range ms {
		addrs = append(addrs, m.Node.Network.NodeIP(i).String())
	}
	known := filepath.Join(dir, "known_hosts")
	state := filepath.Join(dir, "state")
	file := filepath.Join(dir, "cluster.yaml")
	write(t, filepath.Join(dir, "plugins", "fleet", "plugin.yaml"), fleetPlugin)
	write(t, filepath.Join(dir, "plugins", "web", "plugin.yaml"), webPlugin)
	write(t, filepath.Join(dir, "plugins", "web", "manifests", "web.yaml"), webManifests)
	write(t, file, clusterFile(key, known, addrs))
	// kpWhen runs kubeplug; once its output contains trigger (when not ""),
	// it calls then (in its own goroutine, the run going on).
	kpWhen := func(trigger string, then func(), args ...string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
		defer cancel()
		out := &watched{trigger: trigger, then: then}
		args = append(args, "-f", file, "--state-dir", state)
		if args[0] == "up" {
			args = append(args, "--no-kubeconfig-update")
		}
		began := time.Now()
		code := cmd.Main(ctx, args, cmd.Streams{In: strings.NewReader(""), Out: out, Err: out})
		t.Logf("kubeplug %s: exit %d in %s", strings.Join(args, " "), code, time.Since(began).Round(time.Millisecond))
		out.wait()
		return code, out.String()
	}
	kp := func(args ...string) (int, string) {
		t.Helper()
		return kpWhen("", nil, args...)
	}
	downed := false
	t.Cleanup(func() {
		if !downed {
			if code, out := kp("down"); code != 0 {
				t.Errorf("down exited %d:\n%s", code, out)
			}
		}
	})

	// Strict by default: the hosts' keys are unknown, nothing is touched.
	code, out := kp("up")
	if code == 0 || !strings.Contains(out, "is not in "+known) || !strings.Contains(out, "SHA256:") {
		t.Fatalf("up without --accept-new-host-keys: exit %d, want the unknown host keys refused:\n%s", code, out)
	}
	if code, out = kp("up", "--accept-new-host-keys"); code != 0 {
		diagnose(t, state, addrs, key, known)
		t.Fatalf("up: exit %d\n%s", code, out)
	}
	t.Logf("first up's output:\n%s", out)
	kubeconfig := filepath.Join(state, "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://"+addrs[0]+":6443" {
		t.Errorf("the kubeconfig's server is %s, want the control-plane host's", cfg.Host)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	for _, node := range []string{"control-plane-0", "workers-0", "workers-1"} {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !ready(n) {
			t.Errorf("node %s is not Ready", node)
		}
		if strings.HasPrefix(node, "workers") && n.Labels["fleet.kubeplug.dev/host"] != "yes" {
			t.Errorf("node %s lacks the plugin's label: %v", node, n.Labels)
		}
	}
	pod, err := client.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-control-plane-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the API server's mirror Pod: %v", err)
	}
	if !strings.Contains(strings.Join(pod.Spec.Containers[0].Command, " "), "--event-ttl=2h7m0s") {
		t.Errorf("the API server runs without the plugin's flag: %v", pod.Spec.Containers[0].Command)
	}
	cl := sshClients(t, addrs, key, known)
	if got := cl.run(t, 0, "pgrep -a kube-apiserver"); !strings.Contains(got, "--event-ttl=2h7m0s") {
		t.Errorf("the API server process on the control-plane host: %q", got)
	}
	for i := 1; i <= 2; i++ {
		for cmd, want := range map[string]string{
			"cat /etc/fleet/greeting":                  "GREETING\n",
			"systemctl is-active fleet-marker.service": "active\n",
			"cat /var/lib/fleet-marker":                "GREETING\n",
			"systemctl is-active kubelet.service":      "active\n",
			"readlink /usr/bin/kubelet":                "/usr/local/lib/kubeplug/kubeplug-localcluster\n",
		} {
			if got := cl.run(t, i, cmd); got != want {
				t.Errorf("host %s: %s = %q, want %q", addrs[i], cmd, got, want)
			}
		}
	}
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			running++
		}
	}
	if running != 2 {
		t.Errorf("%d of the workload's Pods run, want 2", running)
	}

	// A re-run: nothing uploaded, nothing started.
	code, out = kp("up")
	if code != 0 {
		t.Fatalf("re-run: exit %d\n%s", code, out)
	}
	t.Logf("re-run output:\n%s", out)

	// sshd stopped on a worker mid-run (once the run has connected to it and
	// passed its preflight; its connections dropped too): the run fails
	// naming it; the others finish.
	cl.run(t, 1, "sudo rm /etc/fleet/greeting")
	stopped := make(chan error, 1)
	code, out = kpWhen("node workers-1: preflight", func() {
		_, err := ms[2].Exec(ctx, "sh", "-c", "systemctl stop ssh.service ssh.socket && (loginctl terminate-user "+sshUser+" || pkill -KILL -u "+sshUser+" || true)")
		stopped <- err
	}, "up")
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stop sshd on %s mid-run: %v", addrs[2], err)
		}
	default:
		t.Fatalf("the run never reached workers-1's preflight:\n%s", out)
	}
	if code == 0 || !strings.Contains(out, addrs[2]) {
		t.Fatalf("up with sshd stopped on %s mid-run: exit %d, want it named:\n%s", addrs[2], code, out)
	}
	t.Logf("up with sshd stopped mid-run on %s:\n%s", addrs[2], out)
	if got := cl.run(t, 1, "cat /etc/fleet/greeting"); got != "GREETING\n" {
		t.Errorf("host %s did not finish while %s failed: %q", addrs[1], addrs[2], got)
	}
	if _, err := ms[2].Exec(ctx, "systemctl", "start", "ssh.service"); err != nil {
		t.Fatal(err)
	}
	if code, out = kp("up"); code != 0 {
		t.Fatalf("re-run after sshd started: exit %d\n%s", code, out)
	}

	// A changed host key: refused, fingerprint named, even with --accept-new-host-keys.
	if _, err := ms[2].Exec(ctx, "sh", "-c", "rm -f /etc/ssh/ssh_host_* && ssh-keygen -A >/dev/null && systemctl restart ssh.service"); err != nil {
		t.Fatal(err)
	}
	// The fingerprints of its new keys (the one the handshake offers is named).
	newKeys, err := ms[2].Exec(ctx, "sh", "-c", "for k in /etc/ssh/ssh_host_*_key.pub; do ssh-keygen -lf $k; done")
	if err != nil {
		t.Fatal(err)
	}
	var fps []string
	for _, l := range strings.Split(strings.TrimSpace(newKeys), "\n") {
		fps = append(fps, strings.Fields(l)[1])
	}
	code, out = kp("up", "--accept-new-host-keys")
	named := slices.ContainsFunc(fps, func(fp string) bool { return strings.Contains(out, fp+" CHANGED") })
	if code == 0 || !named || !strings.Contains(out, addrs[2]) {
		t.Fatalf("changed host key (now %v) on %s: exit %d\n%s", fps, addrs[2], code, out)
	}
	// The user trusts the new key: removes the old line, learns the new one.
	b, _ := os.ReadFile(known) //nolint:gosec // the test's file
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.HasPrefix(l, addrs[2]+" ") {
			keep = append(keep, l)
		}
	}
	write(t, known, strings.Join(keep, "\n")+"\n")
	if code, out = kp("up", "--accept-new-host-keys"); code != 0 {
		t.Fatalf("up after the new key is trusted: exit %d\n%s", code, out)
	}

	// A changed pool file (the plugin's node file and a kubelet label) on
	// running hosts: rolled host by host (cordon, drain, deliver, restart,
	// Ready, uncordon) while a PodDisruptionBudget keeps the workload
	// available, checked all through the roll.
	cl = sshClients(t, addrs, key, known) // host 2's key changed
	rollTo(t, ctx, client, cl, addrs, kp, dir, "CHANGED")
	// The changed plugin stays: going back to the old one would be a roll,
	// which the next step's failed host holds back on the other worker.

	// A user whose sudo needs a password, on one host: named, the others go on.
	write(t, file, strings.Replace(clusterFile(key, known, addrs), "{address: "+addrs[1]+"}", "{address: "+addrs[1]+", ssh: {user: "+passwordUser+"}}", 1))
	code, out = kp("up")
	if code == 0 || !strings.Contains(out, "user "+passwordUser+" needs a password for sudo") || !strings.Contains(out, "1 host(s) failed: "+addrs[1]) {
		t.Fatalf("up as %s on %s: exit %d, want the password-less sudo named:\n%s", passwordUser, addrs[1], code, out)
	}
	write(t, file, clusterFile(key, known, addrs))

	// A host removed from the file (workers-1), first unreachable: named,
	// with the choice of --forget-removed-hosts; once its sshd runs, a re-run drains it,
	// deletes its Node and cleans it as down does.
	oneWorker := strings.Replace(clusterFile(key, known, addrs), ", {address: "+addrs[2]+"}]", "]", 1)
	oneWorker = strings.Replace(oneWorker, "count: 2", "count: 1", 1)
	write(t, file, oneWorker)
	if _, err := ms[2].Exec(ctx, "systemctl", "stop", "ssh.service", "ssh.socket"); err != nil {
		t.Fatal(err)
	}
	code, out = kp("up")
	if code == 0 || !strings.Contains(out, addrs[2]) || !strings.Contains(out, "kubeplug up --forget-removed-hosts") {
		t.Fatalf("up with the removed host %s unreachable: exit %d, want it named with --forget-removed-hosts:\n%s", addrs[2], code, out)
	}
	if _, err := ms[2].Exec(ctx, "systemctl", "start", "ssh.service"); err != nil {
		t.Fatal(err)
	}
	if code, out = kp("up"); code != 0 {
		t.Fatalf("up with host %s removed: exit %d\n%s", addrs[2], code, out)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, "workers-1", metav1.GetOptions{}); err == nil {
		t.Errorf("the removed host's Node workers-1 is still there")
	}
	cl = sshClients(t, addrs, key, known)
	// Two commands: pgrep -f matches every command line, its shell's too, and
	// the paths listed would match its pattern.
	got := cl.run(t, 2, "ls /etc/fleet/greeting /usr/local/bin/kubeplug /etc/systemd/system/kubelet.service 2>/dev/null || true")
	got += cl.run(t, 2, "pgrep -a -f '[c]ontainerd|[k]ubelet|[a]gnhost' || true")
	if strings.TrimSpace(got) != "" {
		t.Errorf("the removed host %s is not clean:\n%s", addrs[2], got)
	}

	downed = true
	if code, out = kp("down"); code != 0 {
		t.Fatalf("down: exit %d\n%s", code, out)
	}
	cl = sshClients(t, addrs, key, known)
	for i := range addrs {
		got := cl.run(t, i, "for f in /usr/local/bin/kubeplug /usr/local/bin/containerd /usr/local/bin/containerd-shim-runc-v2 /usr/local/bin/kubeplug-registry /usr/local/lib/kubeplug /usr/bin/kubelet /usr/bin/kube-proxy /var/lib/kubeplug /var/lib/kubelet /etc/kubernetes /etc/fleet/greeting /etc/systemd/system/fleet-marker.service /etc/systemd/system/kubelet.service /etc/systemd/system/containerd.service /etc/containerd /etc/cni/net.d/10-kubeplug.conflist; do if [ -e $f ] || [ -L $f ]; then echo left: $f; fi; done; systemctl list-units --all --no-legend 'kube*' 'fleet*' 'containerd*'")
		got += cl.run(t, i, "pgrep -a -f '[c]ontainerd|[k]ubelet|[k]ube-|[e]tcd|[k]ubeplug|[a]gnhost' || true")
		if strings.TrimSpace(got) != "" {
			t.Errorf("host %s after down:\n%s", addrs[i], got)
		}
	}
}

// rollTo changes the fleet plugin's node file to greeting and adds a kubelet
// label, runs up, and checks that the workload (2 replicas, a
// PodDisruptionBudget of minAvailable 1) stayed available during the roll,
// and that every worker has the new file, the unit's output from it, the new
// label and is schedulable.
func rollTo(t *testing.T, ctx context.Context, client kubernetes.Interface, cl *clients, addrs []string, kp func(...string) (int, string), dir, greeting string) {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	if _, err := client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	changed := strings.Replace(fleetPlugin, `"GREETING\n"`, `"`+greeting+`\n"`, 1)
	changed = strings.Replace(changed, `labels: {fleet.kubeplug.dev/host: "yes"}`, `labels: {fleet.kubeplug.dev/host: "yes", fleet.kubeplug.dev/greeting: "`+strings.ToLower(greeting)+`"}`, 1)
	write(t, filepath.Join(dir, "plugins", "fleet", "plugin.yaml"), changed)
	stop := make(chan struct{})
	watched := make(chan []string)
	go func() {
		var low []string
		checks := 0
		for {
			select {
			case <-stop:
				watched <- append(low, fmt.Sprintf("%d checks", checks))
				return
			case <-time.After(500 * time.Millisecond):
			}
			pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				continue // the API server restarts when its static Pod changes
			}
			checks++
			readyPods := 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && podReady(&p) {
					readyPods++
				}
			}
			if readyPods == 0 {
				low = append(low, time.Now().Format(time.TimeOnly)+": no web Pod ready")
			}
		}
	}()
	code, out := kp("up")
	close(stop)
	seen := <-watched
	if code != 0 {
		t.Fatalf("up with a changed pool file: exit %d, want the hosts rolled:\n%s", code, out)
	}
	t.Logf("roll output:\n%s", out)
	if len(seen) > 1 {
		t.Errorf("the workload was unavailable during the roll (%s): %v", seen[len(seen)-1], seen[:len(seen)-1])
	}
	for i := 1; i <= 2; i++ {
		for cmd, want := range map[string]string{
			"cat /etc/fleet/greeting":                  greeting + "\n",
			"cat /var/lib/fleet-marker":                greeting + "\n",
			"systemctl is-active fleet-marker.service": "active\n",
			"systemctl is-active kubelet.service":      "active\n",
		} {
			if got := cl.run(t, i, cmd); got != want {
				t.Errorf("host %s after the roll: %s = %q, want %q", addrs[i], cmd, got, want)
			}
		}
		node := fmt.Sprintf("workers-%d", i-1)
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels["fleet.kubeplug.dev/greeting"] != strings.ToLower(greeting) || n.Spec.Unschedulable || !ready(n) {
			t.Errorf("node %s after the roll: labels %v, unschedulable %t, ready %t", node, n.Labels, n.Spec.Unschedulable, ready(n))
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// clients are the test's own SSH connections to the hosts, checked against
// the known_hosts file kubeplug wrote.
type clients struct{ c []*ssh.Client }

func sshClients(t *testing.T, addrs []string, keyFile, known string) *clients {
	t.Helper()
	b, err := os.ReadFile(keyFile) //nolint:gosec // the test's key
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	check, err := knownhosts.New(known)
	if err != nil {
		t.Fatal(err)
	}
	cl := &clients{}
	for _, a := range addrs {
		c, err := ssh.Dial("tcp", net.JoinHostPort(a, "22"), &ssh.ClientConfig{
			User: sshUser, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: check, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("ssh to %s: %v", a, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		cl.c = append(cl.c, c)
	}
	return cl
}

// run runs cmd on host i over SSH and returns its output.
func (cl *clients) run(t *testing.T, i int, cmd string) string {
	t.Helper()
	s, err := cl.c[i].NewSession()
	if err != nil {
		t.Fatalf("host %d: %v", i, err)
	}
	defer func() { _ = s.Close() }()
	out, err := s.CombinedOutput(cmd)
	if err != nil {
		t.Fatalf("host %d: %s: %v: %s", i, cmd, err, out)
	}
	return string(out)
}

var _ = realnode.ImageFile

// watched is kubeplug's output, calling then once it contains trigger.
type watched struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	trigger string
	then    func()
	fired   sync.WaitGroup
	done    bool
}

func (w *watched) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if w.trigger != "" && !w.done && strings.Contains(w.buf.String(), w.trigger) {
		w.done = true
		w.fired.Add(1)
		go func() {
			defer w.fired.Done()
			w.then()
		}()
	}
	return n, err
}

// wait waits for then to return, when it was called.
func (w *watched) wait() { w.fired.Wait() }

func (w *watched) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
