package deploy_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// events collects a Deployer's events.
type events struct {
	mu  sync.Mutex
	all []deploy.Event
}

func (e *events) add(ev deploy.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) of(t deploy.EventType) []deploy.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []deploy.Event
	for _, ev := range e.all {
		if ev.Type == t {
			out = append(out, ev)
		}
	}
	return out
}

// TestObjectWaiting: while a plugin's wait for readiness waits, an event names
// the object it waits on and why, once per change, not at every poll.
func TestObjectWaiting(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "waits")
	var ev events
	d := newDeployer(t, deploy.Options{Timeout: 5 * time.Second, Events: ev.add})
	content := objs(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: first, namespace: NS}\n---\n"+stuckDeployment("web"))
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: content}}); err == nil {
		t.Fatal("a Deployment that cannot schedule became ready")
	}
	waiting := ev.of(deploy.ObjectWaiting)
	if len(waiting) == 0 {
		t.Fatal("no ObjectWaiting event while the wait waited 5s")
	}
	for i, e := range waiting {
		if e.Plugin != plugin || e.Object != "Deployment.apps/"+ns+"/web" || e.Message == "" || e.Ready != 1 || e.Total != 2 {
			t.Errorf("ObjectWaiting %+v, want the plugin's Deployment, why, and its ConfigMap ready of 2", e)
		}
		if i > 0 && e.Message == waiting[i-1].Message {
			t.Errorf("ObjectWaiting repeated without a change: %q", e.Message)
		}
	}
	// The Deployment reports its missed deadline within 2s: the reason changes
	// from in progress to it.
	if last := waiting[len(waiting)-1].Message; !strings.Contains(last, "Progress") && !strings.Contains(last, "Available") {
		t.Errorf("the last reason %q says nothing of the Deployment's progress", last)
	}
	t.Logf("waited on: %v", waiting)
}

// TestRetryEventsUnreachable: requests to a server that never answers are
// APIRetrying events (no log warning), then one APIRetried saying they gave up.
func TestRetryEventsUnreachable(t *testing.T) {
	cfg := testcluster.RESTConfig(t)
	cfg.Host = "https://127.0.0.1:1" // nothing listens on port 1
	var ev events
	d, err := deploy.New(cfg, deploy.Options{Events: ev.add, Retry: wait.Backoff{Duration: 600 * time.Millisecond, Factor: 1, Steps: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Ping(t.Context()); err == nil {
		t.Fatal("ping of a closed port answered")
	}
	retrying, retried := ev.of(deploy.APIRetrying), ev.of(deploy.APIRetried)
	// Tries 1 to 4, 600ms apart, told at most once a second and always the last.
	if len(retrying) < 2 || len(retrying) > 3 || retrying[len(retrying)-1].Attempt != 4 {
		t.Errorf("APIRetrying events %+v, want 2 or 3 ending with try 4", retrying)
	}
	for _, e := range retrying {
		if e.Server != cfg.Host || e.Attempts != 4 || !strings.Contains(e.Message, "connection refused") {
			t.Errorf("APIRetrying %+v, want the server, 4 tries and the error", e)
		}
	}
	if len(retried) != 1 || !strings.HasPrefix(retried[0].Message, "gave up: the API server did not answer after 4 tries") {
		t.Errorf("APIRetried events %+v, want one that gave up", retried)
	}
}

// TestRetryEventsAcrossARestart stops and restarts the API server of a private
// control plane: a request made while it is down is retried, told as
// APIRetrying events, and answered once it is back (APIRetried "answered").
// The control plane tells its components starting and ready, and the restart.
func TestRetryEventsAcrossARestart(t *testing.T) {
	var mu sync.Mutex
	var comps []controlplane.ComponentEvent
	down := make(chan struct{})
	cp := testcluster.Start(t, controlplane.Options{Progress: func(e controlplane.ComponentEvent) {
		mu.Lock()
		defer mu.Unlock()
		comps = append(comps, e)
		if e.Component == controlplane.APIServer && e.State == controlplane.ComponentRestarting {
			close(down) // stopped, not started again yet
		}
	}}, -1)
	mu.Lock()
	var started []string
	for _, e := range comps {
		started = append(started, string(e.Component)+" "+string(e.State))
	}
	mu.Unlock()
	// etcd and the API server start together, the scheduler and kwok once it
	// serves, the controller manager once it is ready
	// (controlplane.startComponents).
	want := []string{"etcd starting", "kube-apiserver starting", "etcd ready",
		"kube-scheduler starting", "kwok starting", "kube-apiserver ready", "kube-controller-manager starting",
		"kube-controller-manager ready", "kube-scheduler ready", "kwok ready"}
	if !slices.Equal(started, want) {
		t.Errorf("component events of a start:\n%v\nwant\n%v", started, want)
	}

	var ev events
	d, err := deploy.New(cp.RESTConfig(), deploy.Options{Events: ev.add})
	if err != nil {
		t.Fatal(err)
	}
	restarted := make(chan error, 1)
	go func() { restarted <- cp.Restart(t.Context(), controlplane.APIServer) }()
	select {
	case <-down:
	case err := <-restarted:
		t.Fatalf("restart ended before the API server was down: %v", err)
	}
	if err := d.Ping(t.Context()); err != nil {
		t.Fatalf("ping across the restart: %v", err)
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	retrying, retried := ev.of(deploy.APIRetrying), ev.of(deploy.APIRetried)
	if len(retrying) == 0 || retrying[0].Server != cp.Host() || retrying[0].Attempt < 1 || retrying[0].Attempts != 9 {
		t.Errorf("APIRetrying events %+v, want tries against %s of 9", retrying, cp.Host())
	}
	if len(retried) != 1 || retried[0].Message != "answered" || retried[0].Attempt <= retrying[len(retrying)-1].Attempt {
		t.Errorf("APIRetried events %+v, want one answered after the last retry", retried)
	}
	mu.Lock()
	last := comps[len(comps)-2:]
	mu.Unlock()
	if last[0].State != controlplane.ComponentRestarting || last[1].State != controlplane.ComponentReady || last[1].Component != controlplane.APIServer {
		t.Errorf("component events of the restart: %+v", last)
	}
	t.Logf("retries: %+v; then %+v", retrying, retried)
}
