package dashboard

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

var (
	targetsRes       = schema.GroupVersionResource{Group: "kubeplug.dev", Version: "v1alpha1", Resource: "targetclusters"}
	installationsRes = schema.GroupVersionResource{Group: "kubeplug.dev", Version: "v1alpha1", Resource: "plugininstallations"}
	rolloutsRes      = schema.GroupVersionResource{Group: "kubeplug.dev", Version: "v1alpha1", Resource: "pluginrollouts"}
)

// create makes the object of doc in ns, then sets its status (the status
// subresource), as the controller would.
func create(t *testing.T, dc dynamic.Interface, gvr schema.GroupVersionResource, ns, doc string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	status := u.Object["status"]
	got, err := dc.Resource(gvr).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
	if status != nil {
		got.Object["status"] = status
		if _, err := dc.Resource(gvr).Namespace(ns).UpdateStatus(t.Context(), got, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("status of %s %s: %v", gvr.Resource, u.GetName(), err)
		}
	}
}

const now = "2026-01-01T00:00:00Z"

// TestFleetPage points the dashboard at a management cluster with the
// controller's CRDs and objects made directly: the fleet page shows the
// targets, the installations with phase and conditions, and the rollout with
// its canary, batches and failed cluster named; a status change appears
// through the event stream; suspend and retry behind their confirmation are
// done with the user's credentials, and refused for a user who may only read.
func TestFleetPage(t *testing.T) {
	installCRDs(t)
	ns := testcluster.Namespace(t)
	admin := testcluster.RESTConfig(t)
	dc := dynamic.NewForConfigOrDie(admin)
	create(t, dc, targetsRes, ns, `
apiVersion: kubeplug.dev/v1alpha1
kind: TargetCluster
metadata: {name: edge-1, labels: {fleet: edge}}
spec: {kubeconfigSecret: {name: edge-1-kubeconfig}}
status:
  kubernetesVersion: "1.33.1"
  conditions: [{type: Ready, status: "True", reason: Reachable, message: "", lastTransitionTime: "`+now+`"}]
`)
	create(t, dc, targetsRes, ns, `
apiVersion: kubeplug.dev/v1alpha1
kind: TargetCluster
metadata: {name: edge-2, labels: {fleet: edge}}
spec: {kubeconfigSecret: {name: edge-2-kubeconfig}}
`)
	create(t, dc, installationsRes, ns, `
apiVersion: kubeplug.dev/v1alpha1
kind: PluginInstallation
metadata: {name: web, labels: {kubeplug.dev/rollout: edge, kubeplug.dev/target-cluster: edge-1}}
spec: {target: edge-1, plugins: [{name: hello}]}
status:
  plugins: [{name: hello, version: 1.2.0, revision: 3, ready: true}]
  conditions: [{type: Ready, status: "True", reason: Applied, message: "hello 1.2.0 applied", lastTransitionTime: "`+now+`"}]
`)
	create(t, dc, installationsRes, ns, `
apiVersion: kubeplug.dev/v1alpha1
kind: PluginInstallation
metadata: {name: web-2, labels: {kubeplug.dev/rollout: edge, kubeplug.dev/target-cluster: edge-2}}
spec: {target: edge-2, plugins: [{name: hello}]}
status:
  conditions: [{type: Stalled, status: "True", reason: ApplyFailed, message: "quota exceeded", lastTransitionTime: "`+now+`"}]
`)
	create(t, dc, rolloutsRes, ns, `
apiVersion: kubeplug.dev/v1alpha1
kind: PluginRollout
metadata: {name: edge}
spec:
  clusterSelector: {matchLabels: {fleet: edge}}
  template: {plugins: [{name: hello}]}
  strategy: {batchSize: 2}
status:
  clusters: [{name: edge-1, phase: Ready}, {name: edge-2, phase: Progressing}]
  conditions: [{type: Reconciling, status: "True", reason: Progressing, message: "moving", lastTransitionTime: "`+now+`"}]
`)

	cfg := &action.Config{Logger: testcluster.Logger(t)}
	base := serve(t, cfg, admin, nil, &recorder{})
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	row := func(body, attr, key string) string {
		m := regexp.MustCompile(`(?s)<tr ` + attr + `="` + regexp.QuoteMeta(ns+"/"+key) + `">.*?</tr>`).FindString(body)
		return regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m, " ")
	}

	body := get("/fleet")
	for _, want := range []struct {
		attr, key string
		has       []string
	}{
		{"data-target", "edge-1", []string{"Ready", "1.33.1"}},
		{"data-target", "edge-2", []string{"Unknown"}},
		{"data-installation", "web", []string{"edge-1", "Ready", "hello 1.2.0 (ready)", "Applied", "Suspend…"}},
		{"data-installation", "web-2", []string{"Stalled", "ApplyFailed", "quota exceeded"}},
		{"data-rollout", "edge", []string{"Reconciling", "canary, then batches of 2", "edge-1:", "edge-2:", "Progressing"}},
	} {
		r := row(body, want.attr, want.key)
		for _, h := range want.has {
			if !strings.Contains(r, h) {
				t.Errorf("fleet page, %s %s: no %q in %q", want.attr, want.key, h, r)
			}
		}
	}

	t.Run("a status change appears live", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		events := make(chan string, 10)
		go func() {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "event: ") {
					events <- sc.Text()
				}
			}
		}()
		// Written again until an event comes: the dashboard's watch may
		// still be listing when the first write lands.
		for i := 0; ; i++ {
			u, err := dc.Resource(rolloutsRes).Namespace(ns).Get(ctx, "edge", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_ = unstructured.SetNestedSlice(u.Object, []any{
				map[string]any{"name": "edge-1", "phase": "Ready"},
				map[string]any{"name": "edge-2", "phase": "Failed", "message": fmt.Sprintf("hello: quota exceeded (try %d)", i)},
			}, "status", "clusters")
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Stalled", "status": "True", "reason": "ClusterFailed", "message": "halted by edge-2", "lastTransitionTime": now}}, "status", "conditions")
			if _, err := dc.Resource(rolloutsRes).Namespace(ns).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-events:
			case <-time.After(5 * time.Second):
				if ctx.Err() != nil {
					t.Fatal("no event from the dashboard after the rollout's status changed")
				}
				continue
			}
			break
		}
		r := row(get("/fragments/fleet"), "data-rollout", "edge")
		for _, h := range []string{"Stalled", "edge-2: hello: quota exceeded", "Retry…"} {
			if !strings.Contains(r, h) {
				t.Errorf("after the change, the rollout's row has no %q: %q", h, r)
			}
		}
	})

	// post reads an action's confirmation page on the dashboard at base
	// and submits its form.
	post := func(t *testing.T, base, path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		tok := regexp.MustCompile(`name="token" value="([0-9a-f]+)"`).FindStringSubmatch(string(b))
		if tok == nil {
			t.Fatalf("no confirmation form at %s:\n%s", path, b)
		}
		resp, err = http.PostForm(base+path, url.Values{"token": {tok[1]}, "confirm": {"yes"}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	field := func(gvr schema.GroupVersionResource, name string, path ...string) (any, bool) {
		u, err := dc.Resource(gvr).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
		return v, ok
	}

	t.Run("actions refused for a user who may only read", func(t *testing.T) {
		viewer := serve(t, cfg, limitedUser(t), nil, &recorder{})
		for _, a := range []string{"/fleet/" + ns + "/web/suspend", "/fleet/" + ns + "/edge/retry"} {
			code, body := post(t, viewer, a)
			if code != http.StatusForbidden || !strings.Contains(body, "forbidden") {
				t.Errorf("POST %s as the viewer: %d\n%s", a, code, body)
			}
		}
		if v, _ := field(installationsRes, "web", "spec", "suspend"); v == true {
			t.Error("the viewer's refused suspend suspended the installation")
		}
		if _, ok := field(rolloutsRes, "edge", "metadata", "annotations", "kubeplug.dev/retry"); ok {
			t.Error("the viewer's refused retry annotated the rollout")
		}
	})

	t.Run("suspend, resume and retry behind confirmation", func(t *testing.T) {
		if code, body := post(t, base, "/fleet/"+ns+"/web/suspend"); code != http.StatusOK || !strings.Contains(body, `id="done"`) {
			t.Fatalf("suspend: %d\n%s", code, body)
		}
		if v, _ := field(installationsRes, "web", "spec", "suspend"); v != true {
			t.Errorf("after suspend, spec.suspend = %v", v)
		}
		if r := row(get("/fleet"), "data-installation", "web"); !strings.Contains(r, "Suspended") || !strings.Contains(r, "Resume…") {
			t.Errorf("the suspended installation's row: %q", r)
		}
		if code, body := post(t, base, "/fleet/"+ns+"/web/resume"); code != http.StatusOK || !strings.Contains(body, `id="done"`) {
			t.Fatalf("resume: %d\n%s", code, body)
		}
		if v, _ := field(installationsRes, "web", "spec", "suspend"); v != false {
			t.Errorf("after resume, spec.suspend = %v", v)
		}
		if code, body := post(t, base, "/fleet/"+ns+"/edge/retry"); code != http.StatusOK || !strings.Contains(body, `id="done"`) {
			t.Fatalf("retry: %d\n%s", code, body)
		}
		if _, ok := field(rolloutsRes, "edge", "metadata", "annotations", "kubeplug.dev/retry"); !ok {
			t.Error("retry did not annotate the rollout")
		}
		if _, ok := field(installationsRes, "web-2", "metadata", "annotations", "kubeplug.dev/retry"); !ok {
			t.Error("retry did not annotate the stalled installation web-2")
		}
		if _, ok := field(installationsRes, "web", "metadata", "annotations", "kubeplug.dev/retry"); ok {
			t.Error("retry annotated the Ready installation web")
		}
		// Without the form's token: refused, nothing done.
		resp, err := http.PostForm(base+"/fleet/"+ns+"/web/suspend", url.Values{"confirm": {"yes"}})
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("a suspend without the form's token: %d", resp.StatusCode)
		}
	})
}
