package realnode

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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
	history := func() string {
		t.Helper()
		var out bytes.Buffer
		if code := cmd.Main(ctx, []string{"history", "control-plane", "--kubeconfig", kubeconfig}, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &out}); code != 0 {
			t.Fatalf("history exited %d:\n%s", code, out.String())
		}
		return out.String()
	}

	// A Pod on the worker, which must keep running while the API is
	// unreachable.
	kp("image", "load", demoAppArchive(t, dir))
	pod := keptPod(ctx, t, client, "m-0")

	// The load balancer's machine killed: no API through it until up boots
	// it again; meanwhile the kubelets keep their Pods.
	kill(t, id, "control-plane-lb")
	if _, err := quick.CoreV1().ConfigMaps("default").Get(ctx, "before-faults", metav1.GetOptions{}); err == nil {
		t.Error("the API answers through the load balancer whose machine is killed")
	}
	if err := answers(pod.Status.PodIP); err != nil {
		t.Errorf("Pod %s on m-0 does not answer while the load balancer's machine is killed: %v", pod.Name, err)
	}
	began = time.Now()
	out := kp("up")
	t.Logf("up replacing the load balancer's machine: %s", time.Since(began).Round(time.Second))
	if !strings.Contains(out, "booting the load balancer machine control-plane-lb") {
		t.Errorf("up did not say it booted the load balancer again:\n%s", out)
	}
	there("before-faults")
	create("after-lb")
	if now, err := client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("Pod %s on m-0 after the load balancer's loss: %v", pod.Name, err)
	} else if now.UID != pod.UID || restarts(now) != 0 {
		t.Errorf("Pod %s on m-0 was not kept through the load balancer's loss: UID %s (before %s), %d restarts: %+v", pod.Name, now.UID, pod.UID, restarts(now), now.Status)
	}

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
	historyBefore := history()
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
	// The plugins' release records came back with etcd.
	if got := history(); got != historyBefore {
		t.Errorf("history of control-plane after the restore:\n%s\nbefore the snapshot:\n%s", got, historyBefore)
	}
}

// keptPod runs the test's app as a Pod on node and waits until it is ready.
func keptPod(ctx context.Context, t *testing.T, client kubernetes.Interface, node string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "app", Image: "example.com/demo/app:v1", Args: []string{"serve"},
				Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
			}},
		},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	waitFor(t, 3*time.Minute, "Pod kept ready on "+node, func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "kept", metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = p
		return len(readyIPsOf([]corev1.Pod{*p})) == 1
	}, func() string {
		if last == nil {
			return "no Pod"
		}
		return fmt.Sprintf("%+v", last.Status)
	})
	return last
}

// answers asks the test's app at ip, a few times.
func answers(ip string) error {
	hc := &http.Client{Timeout: time.Second}
	var err error
	for range 5 {
		var resp *http.Response
		if resp, err = hc.Get("http://" + ip + ":8080/"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s", resp.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// restarts is the number of restarts of the Pod's containers.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}
