package realnode

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
)

// TestHAFaults: on three control-plane machines behind the load balancer
// and a worker,
//   - the load balancer's machine killed (kill -9 of its init): the API
//     through it fails, the next up boots it again and the API answers;
//   - all three control-plane machines stopped at once (kill -9 of their
//     inits, as when the host loses power): the next up boots them again
//     with their data, etcd has its three members and quorum, nothing lost;
//   - a snapshot of the three-member etcd, down --purge, up --restore-from
//     onto three new machines: three members again, the ConfigMaps back.
func TestHAFaults(t *testing.T) {
	requireHAE2E(t)
	bin, _ := nodeBins(t)
	useMachineImage(t, bin)

	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	file := filepath.Join(dir, "cluster.yaml")
	snap := filepath.Join(dir, "ha.snapshot")
	write(t, file, haCluster)
	_, kp := cliFor(t, file, state, 15*time.Minute)
	id := realnode.ClusterID(state)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var out bytes.Buffer
		if code := cmd.Main(ctx, []string{"down", "-f", file, "--state-dir", state, "--purge"}, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &out}); code != 0 {
			t.Errorf("down exited %d:\n%s", code, out.String())
		}
		checkNothingLeft(t, state, id)
	})
	machineDiagnostics(t, id, "control-plane-0", "control-plane-1", "control-plane-2", "control-plane-lb", "m-0")

	began := time.Now()
	kp("up")
	t.Logf("time to Ready (3 control-plane machines + load balancer + 1 worker): %s", time.Since(began).Round(time.Second))
	kubeconfig := filepath.Join(state, "controlplane", "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client := clientFor(t, kubeconfig)
	qcfg := *cfg
	qcfg.Timeout = 3 * time.Second
	quick, err := kubernetes.NewForConfig(&qcfg)
	if err != nil {
		t.Fatal(err)
	}
	lb := strings.TrimSuffix(strings.TrimPrefix(cfg.Host, "https://"), ".129:6443")
	endpoints := []string{"http://" + lb + ".2:2379", "http://" + lb + ".3:2379", "http://" + lb + ".4:2379"}
	create := func(name string) {
		t.Helper()
		if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ConfigMap %s: %v", name, err)
		}
	}
	there := func(names ...string) {
		t.Helper()
		for _, name := range names {
			if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Errorf("ConfigMap %s: %v", name, err)
			}
		}
	}
	create("before-faults")

	// The load balancer's machine killed: no API through it until up boots
	// it again.
	kill(t, id, "control-plane-lb")
	if _, err := quick.CoreV1().ConfigMaps("default").Get(ctx, "before-faults", metav1.GetOptions{}); err == nil {
		t.Error("the API answers through the load balancer whose machine is killed")
	}
	began = time.Now()
	out := kp("up")
	t.Logf("up replacing the load balancer's machine: %s", time.Since(began).Round(time.Second))
	if !strings.Contains(out, "booting the load balancer machine control-plane-lb") {
		t.Errorf("up did not say it booted the load balancer again:\n%s", out)
	}
	there("before-faults")
	create("after-lb")

	// All three control-plane machines stopped at once, then booted again
	// with their data: the same members, quorum back.
	before := members(t, endpoints)
	for _, node := range []string{"control-plane-0", "control-plane-1", "control-plane-2"} {
		kill(t, id, node)
	}
	began = time.Now()
	out = kp("up")
	t.Logf("up booting the three stopped control-plane machines again: %s", time.Since(began).Round(time.Second))
	if strings.Contains(out, "replacing it and its etcd member") {
		t.Errorf("up replaced machines that had only stopped:\n%s", out)
	}
	again := members(t, endpoints)
	for name, id := range before {
		if again[name] != id {
			t.Errorf("etcd members after the three machines booted again: %v, before: %v", again, before)
		}
	}
	there("before-faults", "after-lb")

	// Snapshot of the three members, the cluster purged, restored onto three
	// new machines.
	began = time.Now()
	out = kp("etcd", "snapshot", "--to", snap)
	t.Logf("snapshot of the three-member etcd: %s (%s)", time.Since(began).Round(time.Millisecond), strings.TrimSpace(out))
	kp("down", "--purge")
	began = time.Now()
	out = kp("up", "--restore-from", snap)
	t.Logf("restore onto three new control-plane machines to Ready: %s", time.Since(began).Round(time.Second))
	if strings.Count(out, "restored etcd from") != 3 {
		t.Errorf("up did not restore three members:\n%s", out)
	}
	// A new cluster's network may be another: the addresses anew.
	if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		t.Fatal(err)
	}
	lb = strings.TrimSuffix(strings.TrimPrefix(cfg.Host, "https://"), ".129:6443")
	restored := members(t, []string{"http://" + lb + ".2:2379", "http://" + lb + ".3:2379", "http://" + lb + ".4:2379"})
	if len(restored) != 3 {
		t.Errorf("etcd members after the restore: %v", restored)
	}
	client = clientFor(t, kubeconfig)
	there("before-faults", "after-lb")
}
