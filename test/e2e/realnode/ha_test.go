package realnode

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
)

const haCluster = `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: ha}
spec:
  kubernetesVersion: 1.37.1
  controlPlane: {count: 3}
  provider:
    local:
      machinePools: [control-plane, m]
  nodePools:
    - {name: m, role: worker, count: 1}
  plugins:
    enabled:
      - name: control-plane
        values: {clusterCIDR: 10.247.0.0/16}
`

// TestHAControlPlane brings up three control-plane machines (a stacked etcd
// member each, peers over TLS) behind a load balancer machine (HAProxy) and
// a worker machine; a writer writes a ConfigMap every 200 ms through the load
// balancer while control-plane-1's init is killed (kill -9): it logs the
// longest time without a successful write, and every write that succeeded is
// there afterwards. The next up replaces the machine: its old etcd member
// removed, a new one added, three healthy members again. The same for
// control-plane-0. With two of three machines lost, up fails saying quorum
// is lost and what to do.
func TestHAControlPlane(t *testing.T) {
	bin, _ := nodeBins(t)
	useMachineImage(t, bin)

	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	file := filepath.Join(dir, "cluster.yaml")
	write(t, file, haCluster)
	kpCode, kp := cliFor(t, file, state, 15*time.Minute)
	id := realnode.ClusterID(state)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var out bytes.Buffer
		// --keep-plugins: the test ends with etcd's quorum lost, so no API
		// server answers the plugins' uninstall.
		if code := cmd.Main(ctx, []string{"down", "-f", file, "--state-dir", state, "--purge", "--keep-plugins"}, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &out}); code != 0 {
			t.Errorf("down exited %d:\n%s", code, out.String())
		}
		checkNothingLeft(t, state, id)
	})

	began := time.Now()
	out := kp("up")
	t.Logf("time to Ready (3 control-plane machines + load balancer + 1 worker): %s", time.Since(began).Round(time.Second))
	if !strings.Contains(out, "static Pods on 3 machines behind the load balancer") {
		t.Errorf("up did not say it booted three control-plane machines:\n%s", out)
	}
	kubeconfig := filepath.Join(state, "controlplane", "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(cfg.Host, ".129:6443") {
		t.Errorf("the kubeconfig's server is %s, want the load balancer's address", cfg.Host)
	}
	lb := strings.TrimSuffix(strings.TrimPrefix(cfg.Host, "https://"), ".129:6443")
	client := clientFor(t, kubeconfig)
	ctx := context.Background()
	for _, node := range []string{"control-plane-0", "control-plane-1", "control-plane-2", "m-0"} {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil || !ready(n) {
			t.Errorf("node %s: %v", node, err)
		}
	}
	endpoints := []string{"http://" + lb + ".2:2379", "http://" + lb + ".3:2379", "http://" + lb + ".4:2379"}
	before := members(t, endpoints)
	if len(before) != 3 {
		t.Fatalf("etcd members: %v", before)
	}
	// The worker's kubelet reaches the API through the load balancer.
	if got := inMachine(t, id, "m-0", "sh", "-c", "grep server: /etc/kubernetes/kubelet.conf"); !strings.Contains(got, ".129:6443") {
		t.Errorf("the worker's kubelet.conf: %s", got)
	}

	// The writer: a ConfigMap every 200 ms through the load balancer.
	wcfg := *cfg
	wcfg.Timeout = 2 * time.Second
	wclient, err := kubernetes.NewForConfig(&wcfg)
	if err != nil {
		t.Fatal(err)
	}
	killWhileWriting := func(node string) {
		t.Helper()
		written, failures, worstGap := writeWhile(ctx, t, wclient, node, func() { kill(t, id, node) })
		t.Logf("writer while %s is killed: %d ConfigMaps written, %d writes failed, longest time between two successful writes %s (one every 200ms)", node, len(written), failures, worstGap.Round(time.Millisecond))
		if worstGap > 15*time.Second {
			t.Errorf("the API was unavailable through the load balancer for %s", worstGap)
		}
		if lost := missingConfigMaps(ctx, t, client, written); len(lost) > 0 {
			t.Errorf("%d of %d ConfigMaps written through the load balancer are lost: %v", len(lost), len(written), lost)
		}
	}
	killWhileWriting("control-plane-1")

	// The next up replaces the machine and its member.
	began = time.Now()
	out = kp("up")
	t.Logf("up replacing control-plane-1: %s", time.Since(began).Round(time.Second))
	if !strings.Contains(out, "machine control-plane-1 is gone: replacing it and its etcd member") {
		t.Errorf("up did not say it replaced control-plane-1:\n%s", out)
	}
	if strings.Contains(out, "starting it again") {
		t.Logf("the replacement needed a second start:\n%s", out)
	}
	after := members(t, endpoints)
	if len(after) != 3 || after["control-plane-1"] == before["control-plane-1"] || after["control-plane-0"] != before["control-plane-0"] {
		t.Errorf("etcd members after the replacement: %v, before: %v", after, before)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, "control-plane-1", metav1.GetOptions{})
	if err != nil || !ready(n) {
		t.Errorf("node control-plane-1 after its replacement: %v", err)
	}

	// control-plane-0 too: the machine whose root holds the PKI.
	killWhileWriting("control-plane-0")
	began = time.Now()
	out = kp("up")
	t.Logf("up replacing control-plane-0: %s", time.Since(began).Round(time.Second))
	if !strings.Contains(out, "machine control-plane-0 is gone: replacing it and its etcd member") {
		t.Errorf("up did not say it replaced control-plane-0:\n%s", out)
	}
	again := members(t, endpoints)
	if len(again) != 3 || again["control-plane-0"] == after["control-plane-0"] || again["control-plane-1"] != after["control-plane-1"] {
		t.Errorf("etcd members after control-plane-0's replacement: %v, before: %v", again, after)
	}

	// Two of three lost: quorum lost, said, with what to do.
	kill(t, id, "control-plane-1")
	kill(t, id, "control-plane-2")
	code, out := kpCode("up")
	if code == 0 || !strings.Contains(out, "etcd has lost quorum: 1 of 3 members answer") || !strings.Contains(out, "kubeplug up --restore-from") {
		t.Errorf("up with two of three control-plane machines lost: exit %d\n%s", code, out)
	}
}

// kill kills a machine's init (kill -9) and waits until it is gone.
func kill(t *testing.T, id, node string) {
	t.Helper()
	root := runcRoot(t, id, node)
	if out, err := exec.Command("runc", "--root", root, "kill", "kp"+id+"-"+node, "KILL").CombinedOutput(); err != nil {
		t.Fatalf("kill %s's init: %v\n%s", node, err, out)
	}
	waitFor(t, time.Minute, node+" to be gone", func() bool {
		out, _ := exec.Command("runc", "--root", root, "state", "kp"+id+"-"+node).CombinedOutput()
		return !strings.Contains(string(out), `"running"`)
	})
}

// writeWhile writes a ConfigMap every 200 ms through client for 3 s, runs
// act, and goes on for 20 s: it returns the names written, the failed
// writes, and the longest time between two successful writes.
func writeWhile(ctx context.Context, t *testing.T, client kubernetes.Interface, tag string, act func()) (written []string, failures int, worstGap time.Duration) {
	t.Helper()
	var mu sync.Mutex
	lastOK := time.Now()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			name := fmt.Sprintf("w-%s-%04d", tag, i)
			_, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			mu.Lock()
			now := time.Now()
			if err == nil {
				written = append(written, name)
				worstGap = max(worstGap, now.Sub(lastOK))
				lastOK = now
			} else {
				failures++
			}
			mu.Unlock()
		}
	}()
	time.Sleep(3 * time.Second)
	act()
	time.Sleep(20 * time.Second)
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	return written, failures, worstGap
}

// members are the etcd members' IDs by name, all of which must answer.
func members(t *testing.T, endpoints []string) map[string]uint64 {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	out := map[string]uint64{}
	// What was seen last, for the failure: the list, or the member that
	// did not answer.
	last := "nothing yet"
	waitFor(t, 2*time.Minute, "three healthy etcd members", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		list, err := cli.MemberList(ctx)
		if err != nil {
			last = fmt.Sprintf("member list through %v: %v", endpoints, err)
			return false
		}
		var seen []string
		for _, m := range list.Members {
			seen = append(seen, fmt.Sprintf("%s %x %v", m.Name, m.ID, m.ClientURLs))
		}
		if last = fmt.Sprintf("members [%s]", strings.Join(seen, "; ")); len(list.Members) != 3 {
			return false
		}
		clear(out)
		for _, m := range list.Members {
			if len(m.ClientURLs) == 0 {
				last += ": " + m.Name + " has not started (no client URL)"
				return false
			}
			if _, err := cli.Status(ctx, m.ClientURLs[0]); err != nil {
				last += fmt.Sprintf(": %s does not answer: %v", m.Name, err)
				return false
			}
			out[m.Name] = m.ID
		}
		return true
	}, func() string { return last })
	return out
}

// machineDiagnostics logs, once the test has failed and before its cleanup
// takes the machines down, what tells why for each of nodes: whether its
// machine runs, its failed units, and the last lines of its kubelet's
// journal.
func machineDiagnostics(t *testing.T, id string, nodes ...string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, node := range nodes {
			failed, err := machineExec(id, node, "systemctl", "--failed", "--no-legend", "--plain")
			if err != nil {
				t.Logf("machine %s: %v", node, err)
				continue
			}
			journal, _ := machineExec(id, node, "journalctl", "-u", "kubelet.service", "-n", "300", "--no-pager", "-o", "short-precise")
			t.Logf("machine %s: failed units: %s\nkubelet's journal, its last errors:\n%s", node, strings.TrimSpace(failed), kubeletErrors(journal, 12))
		}
	})
}

// kubeletNoise are kubelet errors every machine logs all along (no block
// device for containerd's overlay, no static Pods on a worker, slow
// housekeeping on shared cores): they tell nothing of a failure.
var kubeletNoise = []string{"cannot find filesystem info", "HasDedicatedImageFs", "Unable to read config path", "Housekeeping took longer"}

// kubeletErrors are the last n error lines (klog's E) of a kubelet journal
// but its noise.
func kubeletErrors(journal string, n int) string {
	var out []string
	for _, line := range strings.Split(journal, "\n") {
		if !strings.Contains(line, "]: E") || slices.ContainsFunc(kubeletNoise, func(s string) bool { return strings.Contains(line, s) }) {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out[max(0, len(out)-n):], "\n")
}
