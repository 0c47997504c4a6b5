package hosts

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeplug/kubeplug/pkg/provider"
)

// A worker whose Node is Ready but under disk pressure (the hosts' disk
// below the kubelet's eviction threshold) takes no new Pod: up says so on
// the host's line, with the kubelet's message, instead of leaving the
// workload to wait unscheduled without a word.
func TestNodeReadyNamesPressure(t *testing.T) {
	node := func(name string, disk corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Message: "kubelet has sufficient memory available"},
			{Type: corev1.NodeDiskPressure, Status: disk, Message: "kubelet has disk pressure"},
		}}}
	}
	kc := fake.NewClientset(node("workers-0", corev1.ConditionTrue), node("workers-1", corev1.ConditionFalse))
	var mu sync.Mutex
	got := map[string][]string{}
	p := &Provider{opts: Options{Events: func(e provider.Event) {
		mu.Lock()
		defer mu.Unlock()
		got[e.Node] = append(got[e.Node], e.Message)
	}, Logger: slog.New(slog.DiscardHandler)}, timeouts: timeouts{ready: 5 * time.Second}}
	for _, n := range []string{"workers-0", "workers-1"} {
		h := &Host{Address: "192.0.2.1", Node: n, Pool: "workers"}
		if err := p.nodeReady(context.Background(), kc, &client{host: h}, nil); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
	if msgs := strings.Join(got["workers-0"], "\n"); !strings.Contains(msgs, "DiskPressure (kubelet has disk pressure)") || !strings.Contains(msgs, "no new Pod is scheduled here") || strings.Contains(msgs, "MemoryPressure") {
		t.Errorf("workers-0, under disk pressure: %q", msgs)
	}
	if msgs := got["workers-1"]; len(msgs) != 0 {
		t.Errorf("workers-1, under none: %q", msgs)
	}
}

// A built-in image whose binary is not built is named, not silently left off
// the hosts (a workload running it would wait in ImagePullBackOff).
func TestBuiltinImagesNamesMissing(t *testing.T) {
	imgs, missing, err := builtinImages(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 0 || !slices.Contains(missing, "registry.k8s.io/e2e-test-images/agnhost:2.66.1") || slices.Contains(missing, "ghcr.io/kubeplug/kubeplug:latest") {
		t.Errorf("from an empty directory: images %v, missing %v; want none, and every built-in but the on-demand one missing", imgs, missing)
	}
}
