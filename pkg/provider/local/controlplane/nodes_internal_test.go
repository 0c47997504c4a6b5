package controlplane

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestWaitsForManyNodesShareOneList: waiting for a pool of Nodes at once asks
// the API server for one LIST per poll, not one GET per Node (a pool of
// hundreds polled each 100 ms was thousands of requests a second); a Node
// that is not Ready yet is waited for until it is.
func TestWaitsForManyNodesShareOneList(t *testing.T) {
	const n = 200
	var objs []runtime.Object
	for i := range n {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	}
	late := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "late"}}
	objs = append(objs, late)
	cs := fake.NewClientset(objs...)
	var lists, gets atomic.Int32
	cs.PrependReactor("*", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "list":
			lists.Add(1)
		case "get":
			gets.Add(1)
		}
		return false, nil, nil
	})
	c := &ControlPlane{client: cs, procs: map[Component]*process{}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n+1)
	for i := range n {
		wg.Go(func() { errs <- c.waitNodeReady(ctx, fmt.Sprintf("node-%d", i)) })
	}
	wg.Go(func() { errs <- c.waitNodeReady(ctx, "late") })
	time.Sleep(300 * time.Millisecond)
	late.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, late, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The 200 Ready ones share LISTs: a wait that began while one was in
	// flight asks for the next, so how many depends on how the 200 goroutines
	// were scheduled (a loaded CI machine made 13); "late" adds one per poll
	// for ~300 ms. One GET per Node per poll would be 201 and more; a fifth of
	// that bounds the sharing without timing the scheduler.
	if got := lists.Load(); got > n/5 || gets.Load() > 0 {
		t.Errorf("waiting for %d Nodes made %d LISTs and %d GETs, want a few LISTs and no GET", n+1, got, gets.Load())
	}
}
