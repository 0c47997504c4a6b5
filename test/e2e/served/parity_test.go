package served

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubeplug/kubeplug/sdk/apiserver"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestServedAPIClientParity checks, through the kube-apiserver and with its
// own kubectl, that a served API answers clients as a built-in one does.
func TestServedAPIClientParity(t *testing.T) {
	e := newEnv(t, "")
	stop := e.serve(e.listen(), apiserver.Options{Resources: []apiserver.Resource{widgetResource}})
	defer stop()
	e.waitApplied()
	widgets := "widgets." + e.group
	gvr := schema.GroupVersionResource{Group: e.group, Version: "v1alpha1", Resource: "widgets"}
	client := e.dyn.Resource(gvr).Namespace(e.ns)

	var docs []string
	for i := range 7 {
		team, color := "a", "red"
		if i%2 == 1 {
			team = "b"
		}
		if i%3 == 0 {
			color = "blue"
		}
		docs = append(docs, fmt.Sprintf("apiVersion: %s/v1alpha1\nkind: Widget\nmetadata: {name: w%d, namespace: %s, labels: {team: %s}}\nspec: {size: %d, color: %s}\n", e.group, i, e.ns, team, i+1, color))
		if i == 6 {
			docs[i] = strings.Replace(docs[i], ", color: blue", "", 1) // the schema's default
		}
	}
	// kubectl validates against the OpenAPI the kube-apiserver aggregates from
	// the server, once it has fetched it.
	eventually(t, 90*time.Second, func() error {
		out, err := e.kubectl("create", "-f", e.file("widgets.yaml", strings.Join(docs, "---\n")))
		if err != nil {
			return fmt.Errorf("kubectl create (without --validate=false): %w\n%s", err, out)
		}
		return nil
	})
	names := func(args ...string) string {
		t.Helper()
		out, err := e.kubectl(append([]string{"get", widgets, "-n", e.ns, "-o", "jsonpath={.items[*].metadata.name}"}, args...)...)
		if err != nil {
			t.Fatalf("kubectl get %v: %v\n%s", args, err, out)
		}
		return out
	}

	t.Run("openapi", func(t *testing.T) {
		if got := names("--field-selector", "spec.color=blue"); got != "w0 w3 w6" {
			t.Errorf("the schema's default color: --field-selector spec.color=blue: %q", got)
		}
		bad := e.file("bad.yaml", "apiVersion: "+e.group+"/v1alpha1\nkind: Widget\nmetadata: {name: bad, namespace: "+e.ns+"}\nspec: {size: 1, colour: red}\n")
		if out, err := e.kubectl("create", "-f", bad); err == nil || !strings.Contains(out, `unknown field "spec.colour"`) {
			t.Errorf("kubectl create of an unknown field was not refused naming it: %v\n%s", err, out)
		}
		bad = e.file("bad2.yaml", "apiVersion: "+e.group+"/v1alpha1\nkind: Widget\nmetadata: {name: bad, namespace: "+e.ns+"}\nspec: {size: 0}\n")
		if out, err := e.kubectl("create", "-f", bad); err == nil || !strings.Contains(out, "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1") {
			t.Errorf("kubectl create against the schema's minimum was not refused naming the field: %v\n%s", err, out)
		}
		out, err := e.kubectl("explain", widgets+".spec")
		if err != nil || !strings.Contains(out, "How many pieces the widget has.") || !strings.Contains(out, "color\t<string>") {
			t.Errorf("kubectl explain: %v\n%s", err, out)
		}
	})

	t.Run("table", func(t *testing.T) {
		out, err := e.kubectl("get", widgets, "-n", e.ns, "-l", "team=b")
		if err != nil {
			t.Fatal(err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if !regexpLine(lines[0], "NAME", "SIZE", "COLOR", "PHASE", "AGE") || len(lines) != 4 || !regexpLine(lines[1], "w1", "2", "red") {
			t.Errorf("kubectl get does not show the declared columns:\n%s", out)
		}
	})

	t.Run("status subresource", func(t *testing.T) {
		if out, err := e.kubectl("patch", widgets, "w5", "-n", e.ns, "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Ready"}}`); err != nil {
			t.Fatalf("patch --subresource=status: %v\n%s", err, out)
		}
		// Through the object, the status does not change and the spec does.
		if out, err := e.kubectl("patch", widgets, "w5", "-n", e.ns, "--type=merge", "-p", `{"spec":{"size":9},"status":{"phase":"Gone"}}`); err != nil {
			t.Fatalf("patch: %v\n%s", err, out)
		}
		out, err := e.kubectl("get", widgets, "w5", "-n", e.ns, "-o", "jsonpath={.spec.size} {.status.phase} {.metadata.generation}")
		if err != nil || out != "9 Ready 2" {
			t.Errorf("after a status patch and an object patch: %v %q, want size 9, phase Ready, generation 2", err, out)
		}
	})

	t.Run("get -w", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(testcluster.ControlPlane(t).BinDir(), "kubectl"), "--kubeconfig", e.kubeconfig, "get", widgets, "-n", e.ns, "-w", "--output-watch-events", "--field-selector", "metadata.name=w1")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		sc := bufio.NewScanner(stdout)
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if regexpLine(sc.Text(), "ADDED", "w1") {
				// The list is printed: now change w1.
				if out, err := e.kubectl("patch", widgets, "w1", "-n", e.ns, "--type=merge", "-p", `{"spec":{"size":42}}`); err != nil {
					t.Fatalf("patch: %v\n%s", err, out)
				}
			}
			if regexpLine(sc.Text(), "MODIFIED", "w1", "42") {
				return
			}
		}
		t.Errorf("kubectl get -w did not show w1 modified with size 42:\n%s", strings.Join(lines, "\n"))
	})

	t.Run("server-side apply", func(t *testing.T) {
		cfg := func(size int) string {
			return e.file(fmt.Sprintf("ssa-%d.yaml", size), fmt.Sprintf("apiVersion: %s/v1alpha1\nkind: Widget\nmetadata: {name: ssa, namespace: %s}\nspec: {size: %d, color: red}\n", e.group, e.ns, size))
		}
		if out, err := e.kubectl("apply", "--server-side", "-f", cfg(3)); err != nil || !strings.Contains(out, "serverside-applied") {
			t.Fatalf("apply --server-side: %v\n%s", err, out)
		}
		if out, err := e.kubectl("apply", "--server-side", "-f", cfg(3)); err != nil {
			t.Fatalf("apply --server-side again: %v\n%s", err, out)
		}
		out, err := e.kubectl("apply", "--server-side", "--field-manager=rival", "-f", cfg(5))
		if err == nil || !strings.Contains(out, `conflict with "kubectl"`) || !strings.Contains(out, ".spec.size") {
			t.Fatalf("an apply of another manager's field was not refused naming it: %v\n%s", err, out)
		}
		if out, err := e.kubectl("apply", "--server-side", "--field-manager=rival", "--force-conflicts", "-f", cfg(5)); err != nil {
			t.Fatalf("apply --force-conflicts: %v\n%s", err, out)
		}
		out, err = e.kubectl("get", widgets, "ssa", "-n", e.ns, "-o", "jsonpath={.spec.size} {.metadata.managedFields[*].manager}")
		if err != nil || out != "5 kubectl rival" {
			t.Errorf("after the forced apply: %v %q, want size 5 and both managers", err, out)
		}
		if out, err := e.kubectl("delete", widgets, "ssa", "-n", e.ns); err != nil {
			t.Fatalf("delete: %v\n%s", err, out)
		}
	})

	t.Run("stale update", func(t *testing.T) {
		old, err := client.Get(t.Context(), "w2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if out, err := e.kubectl("patch", widgets, "w2", "-n", e.ns, "--type=merge", "-p", `{"spec":{"size":7}}`); err != nil {
			t.Fatalf("patch: %v\n%s", err, out)
		}
		_ = unstructured.SetNestedField(old.Object, int64(8), "spec", "size")
		if _, err := client.Update(t.Context(), old, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Errorf("an update with a stale resourceVersion: want 409 Conflict, got %v", err)
		}
	})

	t.Run("label selector", func(t *testing.T) {
		if got := names("-l", "team=a"); got != "w0 w2 w4 w6" {
			t.Errorf("get -l team=a: %q", got)
		}
		if got := names("-l", "team!=a,team"); got != "w1 w3 w5" {
			t.Errorf("get -l team!=a,team: %q", got)
		}
		out, err := e.kubectl("get", widgets, "-n", e.ns, "-l", "team in (a")
		if err == nil || !strings.Contains(out, "BadRequest") || !strings.Contains(out, "unable to parse requirement") {
			t.Errorf("a selector that does not parse was not refused with 400 and the reason: %v\n%s", err, out)
		}
	})

	t.Run("field selector", func(t *testing.T) {
		if got := names("--field-selector", "metadata.name=w3"); got != "w3" {
			t.Errorf("get --field-selector metadata.name=w3: %q", got)
		}
		if got := names("--field-selector", "spec.color=blue"); got != "w0 w3 w6" {
			t.Errorf("get --field-selector spec.color=blue: %q", got)
		}
		if got := names("--field-selector", "spec.color!=blue,metadata.namespace="+e.ns, "-l", "team=b"); got != "w1 w5" {
			t.Errorf("get --field-selector spec.color!=blue -l team=b: %q", got)
		}
		out, err := e.kubectl("get", widgets, "-n", e.ns, "--field-selector", "spec.size=3")
		if err == nil || !strings.Contains(out, "BadRequest") || !strings.Contains(out, "field label not supported: spec.size") {
			t.Errorf("a field the API does not declare was not refused with 400: %v\n%s", err, out)
		}
	})

	t.Run("paging", func(t *testing.T) {
		e.requests.reset()
		if got := names("--chunk-size=2"); got != "w0 w1 w2 w3 w4 w5 w6" {
			t.Errorf("get --chunk-size=2: %q", got)
		}
		pages := e.requests.lines(`"verb":"list"`, `"resource":"widgets"`, "limit=2")
		continued := e.requests.lines(`"verb":"list"`, "limit=2", "continue=")
		if len(pages) != 4 || len(continued) != 3 {
			t.Errorf("get --chunk-size=2 on 7 objects: the server saw %d list requests with limit=2 (%d with continue), want 4 (3):\n%s", len(pages), len(continued), strings.Join(pages, "\n"))
		}
		first, err := client.List(t.Context(), metav1.ListOptions{Limit: 2, LabelSelector: "team=a"})
		if err != nil || len(first.Items) != 2 || first.GetContinue() == "" {
			t.Fatalf("first page: %v %v", err, first)
		}
		var got []string
		for l := first; ; {
			for _, u := range l.Items {
				got = append(got, u.GetName())
			}
			if l.GetContinue() == "" {
				break
			}
			if l, err = client.List(t.Context(), metav1.ListOptions{Limit: 2, LabelSelector: "team=a", Continue: l.GetContinue()}); err != nil {
				t.Fatalf("next page: %v", err)
			}
		}
		if !slices.Equal(got, []string{"w0", "w2", "w4", "w6"}) {
			t.Errorf("pages of 2 with -l team=a: %v", got)
		}
		_, err = client.List(t.Context(), metav1.ListOptions{Limit: 2, LabelSelector: "team=b", Continue: first.GetContinue()})
		if !apierrors.IsResourceExpired(err) {
			t.Errorf("a continue token from another list: want 410 Gone, got %v", err)
		}
		_, err = client.List(t.Context(), metav1.ListOptions{Limit: 2, Continue: "garbage"})
		if !apierrors.IsBadRequest(err) {
			t.Errorf("a continue token that is not one: want 400, got %v", err)
		}
	})

	t.Run("private storage", func(t *testing.T) {
		// mallory may edit the namespace's ConfigMaps and Secrets; vera is
		// bound to the built-in view role there; wendy may read widgets.
		rbac := e.file("editor.yaml", `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: storage-editor, namespace: `+e.ns+`}
rules: [{apiGroups: [""], resources: [configmaps, secrets], verbs: [get, list, create, update, patch, delete]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: storage-editor, namespace: `+e.ns+`}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: storage-editor}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: mallory}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: viewer, namespace: `+e.ns+`}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: vera}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: widget-reader, namespace: `+e.ns+`}
rules: [{apiGroups: [`+e.group+`], resources: [widgets], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: widget-reader, namespace: `+e.ns+`}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: widget-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: wendy}]
`)
		if out, err := e.kubectl("apply", "-f", rbac); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		sel := "apiserver.sdk.kubeplug.dev/resource=widgets." + e.group
		out, err := e.kubectl("get", "secrets", "-n", e.ns, "-l", sel, "-o", "name")
		stored := strings.Fields(out)
		if err != nil || len(stored) != 7 {
			t.Fatalf("the storage's Secrets: %v\n%s", err, out)
		}
		// Reads: the view role reads the namespace's ConfigMaps but not its
		// Secrets, so not the objects; nor may vera use the API itself,
		// whose RBAC is its own (view grants nothing of its group).
		for _, args := range [][]string{
			{"get", "secrets", "-l", sel},
			{"get", stored[0]},
			{"get", widgets},
		} {
			out, err := e.kubectl(append(args, "-n", e.ns, "--as=vera")...)
			if err == nil || !strings.Contains(out, "forbidden") {
				t.Errorf("kubectl %v by a user bound to view was not forbidden: %v\n%s", args, err, out)
			}
		}
		if out, err := e.kubectl("get", "configmaps", "-n", e.ns, "-l", sel, "-o", "name", "--as=vera"); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("a user bound to view lists ConfigMap storage: %v\n%s", err, out)
		}
		// wendy may read widgets through the API (its RBAC), and still not
		// the storage.
		if out, err := e.kubectl("get", widgets, "-n", e.ns, "--as=wendy", "-o", "name"); err != nil || strings.Count(out, "widget") != 7 {
			t.Errorf("a user granted widgets cannot list them: %v\n%s", err, out)
		}
		if out, err := e.kubectl("get", stored[0], "-n", e.ns, "--as=wendy"); err == nil || !strings.Contains(out, "forbidden") {
			t.Errorf("a user granted widgets reads their storage: %v\n%s", err, out)
		}
		// Writes: refused to anyone but the server.
		for _, args := range [][]string{
			{"patch", stored[0], "--type=merge", "-p", `{"stringData":{"object.json":"{}"}}`},
			{"label", stored[1], "apiserver.sdk.kubeplug.dev/resource-"},
			{"delete", stored[2]},
			{"create", "configmap", "forged", "--from-literal=object.json={}"},
		} {
			out, err := e.kubectl(append(args, "-n", e.ns, "--as=mallory")...)
			if args[0] == "create" {
				// A ConfigMap that is no storage is mallory's as before.
				if err != nil {
					t.Errorf("the policy refused a ConfigMap that is no storage: %v\n%s", err, out)
				}
				continue
			}
			if err == nil || !strings.Contains(out, "written only by its server") || !strings.Contains(out, "not by mallory") {
				t.Errorf("kubectl %v by a user who may edit Secrets was not refused: %v\n%s", args, err, out)
			}
		}
		forged := e.file("forged.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: forged-storage, namespace: "+e.ns+", labels: {"+strings.Replace(sel, "=", ": ", 1)+"}}\ndata: {object.json: '{}'}\n")
		if out, err := e.kubectl("create", "-f", forged, "--as=mallory"); err == nil || !strings.Contains(out, "written only by its server") {
			t.Errorf("a ConfigMap labelled as the storage by mallory was not refused: %v\n%s", err, out)
		}
		if got := names(); got != "w0 w1 w2 w3 w4 w5 w6" {
			t.Errorf("widgets after the refused writes: %q", got)
		}
	})

	t.Run("watch with selectors", func(t *testing.T) {
		list, err := client.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		w, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion(), LabelSelector: "team=a", FieldSelector: "spec.color=red"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		for _, p := range []struct{ name, patch string }{
			{"w1", `{"spec":{"size":10}}`},                 // team b
			{"w0", `{"spec":{"size":10}}`},                 // blue
			{"w2", `{"spec":{"size":10}}`},                 // team a, red: seen
			{"w3", `{"metadata":{"labels":{"team":"a"}}}`}, // now a but blue
			{"w4", `{"spec":{"size":11}}`},                 // seen
		} {
			if out, err := e.kubectl("patch", widgets, p.name, "-n", e.ns, "--type=merge", "-p", p.patch); err != nil {
				t.Fatalf("patch %s: %v\n%s", p.name, err, out)
			}
		}
		var seen []string
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type == watch.Modified {
				seen = append(seen, u.GetName())
			}
			if slices.Contains(seen, "w4") {
				break
			}
		}
		if !slices.Equal(seen, []string{"w2", "w4"}) {
			t.Errorf("watch -l team=a --field-selector spec.color=red saw %v, want [w2 w4]", seen)
		}
		// Leaving the field selector's view is DELETED, coming back ADDED,
		// as the API server's own watch says it.
		for _, p := range []string{`{"spec":{"color":"blue"}}`, `{"spec":{"color":"red"}}`} {
			if out, err := e.kubectl("patch", widgets, "w2", "-n", e.ns, "--type=merge", "-p", p); err != nil {
				t.Fatalf("patch w2: %v\n%s", err, out)
			}
		}
		var events []string
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				events = append(events, string(ev.Type)+" "+u.GetName())
			}
			if len(events) == 2 {
				break
			}
		}
		if !slices.Equal(events, []string{"DELETED w2", "ADDED w2"}) {
			t.Errorf("w2 leaving and re-entering the field selector: %v, want [DELETED w2 ADDED w2]", events)
		}
	})
}

// widgetResource is the example's Widget: a schema with a default and a
// minimum, columns, a status subresource and a selectable field.
var widgetResource = apiserver.Resource{
	Kind: "Widget", Plural: "widgets", Namespaced: true, Status: true,
	SelectableFields: []string{".spec.color"},
	Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"size":  {Type: "integer", Minimum: ptr(1.0), Description: "How many pieces the widget has."},
				"color": {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"blue"`)}, Description: "The widget's color."},
			}},
			"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"phase": {Type: "string"},
			}},
		},
	},
	Columns: []apiextensionsv1.CustomResourceColumnDefinition{
		{Name: "Size", Type: "integer", JSONPath: ".spec.size"},
		{Name: "Color", Type: "string", JSONPath: ".spec.color"},
		{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
		{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	},
}

func ptr[T any](v T) *T { return &v }

// eventually retries f until it succeeds or the timeout passes, then fails
// the test with its last error.
func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
	}
}
