package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/internal/faultpoint"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/lease"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// kubeplugBin is the kubeplug CLI, built once for every test of the package: the
// fault points kill a real process, so the CLI runs as one.
var kubeplugBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kubeplug-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kubeplugBin = filepath.Join(dir, "kubeplug")
	build := exec.Command("go", "build", "-o", kubeplugBin, "github.com/kubeplug/kubeplug/cmd/kubeplug")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "build kubeplug: %v\n", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := testcluster.Run(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// run is one kubeplug process's outcome.
type run struct {
	args   []string
	output string
	err    error
	// killed is true when the process died of SIGKILL.
	killed bool
}

func (r run) String() string {
	return fmt.Sprintf("kubeplug %s: %v\n%s", strings.Join(r.args, " "), r.err, r.output)
}

// kubeplug runs the CLI against kubeconfig, with KUBEPLUG_FAULTPOINT set to point
// when it is not empty (and unset otherwise).
func kubeplug(t *testing.T, kubeconfig, point string, args ...string) run {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubeplugBin, args...)
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, faultpoint.EnvVar+"=") || strings.HasPrefix(kv, "KUBECONFIG=")
	})
	env = append(env, "KUBECONFIG="+kubeconfig)
	if point != "" {
		env = append(env, faultpoint.EnvVar+"="+point)
	}
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	r := run{args: args, output: out.String(), err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			r.killed = true
		}
	}
	return r
}

// lostLease is what a run says when it could not renew its operation lease.
const lostLease = "lost the operation lease"

// killedUpgrade applies version 1 of the fixture with prefix p, then version
// 2 with point set, and returns version 2's file and that run.
func killedUpgrade(t *testing.T, kubeconfig, p, point string) (string, run) {
	t.Helper()
	dir := t.TempDir()
	if r := kubeplug(t, kubeconfig, "", applyArgs(writeFixture(t, dir, p, 1))...); r.err != nil {
		t.Fatalf("version 1: %s", r)
	}
	v2 := writeFixture(t, dir, p, 2)
	return v2, kubeplug(t, kubeconfig, point, applyArgs(v2)...)
}

// applyArgs applies a cluster file with a short lease, so that the run after a
// kill waits a few seconds at most for the dead run's lease to expire.
func applyArgs(file string) []string {
	return []string{"apply", "-f", file, "--no-builtin", "--timeout", "1m", "--lease-duration", "3s", "--lock-timeout", "1m"}
}

// matrix is every fault point the multi-plugin upgrade passes, with the hit to
// kill at (name:N): between waves, mid-wave, in and around Helm SDK calls, while
// writing the release records, mid-prune and while uninstalling the plugin that
// version 2 dropped. A point the upgrade never reaches fails its case.
var matrix = []string{
	"lease:taken",
	"apply:wave-start:1",
	"apply:recorded:1",
	"state:chunks-written:1",
	"state:head-written:1",
	"apply:definitions-ready:1",
	"apply:before-finish:1",
	"apply:wave-end:1",
	"apply:wave-start:2",
	"apply:recorded:3",
	"state:chunks-written:2",
	"apply:object-applied:1",
	"apply:object-applied:8",
	"apply:object-applied:14",
	"apply:before-releases:2",
	"helm:before-upgrade:1",
	"helm:pending-recorded:1",
	"helm:before-deployed-recorded:1",
	"helm:after-upgrade:1",
	"helm:before-install:1",
	"helm:pending-recorded:2",
	"helm:after-install:1",
	"apply:before-prune:3",
	"delete:object-deleted:1",
	"apply:before-remove-unlisted",
	"uninstall:before-plugin:1",
	"helm:before-uninstall:1",
	"helm:after-uninstall:1",
	"delete:object-deleted:2",
	"uninstall:objects-deleted:1",
	"uninstall:plugin-removed:1",
}

// TestKill9Matrix kills a multi-plugin upgrade (version 1 to 2 of the fixture)
// with SIGKILL at every point of the matrix, re-runs it, and checks that the
// re-run converged: every desired object as desired, removed ones gone, no
// object outside every plugin's release record, the lease free, no Helm release
// pending. KUBEPLUG_FAULTS=point,point runs only those points.
func TestKill9Matrix(t *testing.T) {
	points := matrix
	if s := os.Getenv("KUBEPLUG_FAULTS"); s != "" {
		points = strings.Split(s, ",")
	}
	kubeconfig := testcluster.ControlPlane(t).KubeconfigPath()
	rc := testcluster.RESTConfig(t)
	converged, diverged := 0, 0
	for i, point := range points {
		if t.Run(point, func(t *testing.T) {
			p := fmt.Sprintf("k%02d", i)
			v2, r := killedUpgrade(t, kubeconfig, p, point)
			if !r.killed && strings.Contains(r.output, lostLease) {
				// The run lost its 3 s lease before it reached the point (a
				// loaded machine): that is not the case under test; start it
				// over once, on fresh objects.
				t.Logf("the upgrade lost its lease before %s; once more: %s", point, r)
				p += "r"
				v2, r = killedUpgrade(t, kubeconfig, p, point)
			}
			if !r.killed {
				t.Fatalf("the upgrade was not killed at %s (the point was never hit): %s", point, r)
			}
			// What the kill left: the checks below must see it, or they prove nothing.
			if left := slices.DeleteFunc(divergence(t, rc, p), func(s string) bool { return strings.HasPrefix(s, "lease: ") }); len(left) > 0 {
				diverged++
				t.Logf("after kill -9 at %s, before the re-run: %d problem(s):\n\t%s", point, len(left), strings.Join(left, "\n\t"))
			}
			if r := kubeplug(t, kubeconfig, "", applyArgs(v2)...); r.err != nil {
				t.Fatalf("re-run after kill -9 at %s: %s", point, r)
			}
			for _, problem := range divergence(t, rc, p) {
				t.Errorf("after the re-run: %s", problem)
			}
		}) {
			converged++
		}
	}
	t.Logf("kill -9 matrix: %d/%d runs converged", converged, len(points))
	t.Logf("%d of the %d killed runs left the cluster visibly diverged before the re-run", diverged, len(points))
	if len(points) == len(matrix) && diverged < len(points)/2 {
		t.Errorf("only %d of %d killed runs left a divergence the checks saw: the checks are too weak", diverged, len(points))
	}
}

// TestUninstallRemovedFromCatalog installs the fixture, deletes the plugins'
// source, and uninstalls them: the release records are enough.
func TestUninstallRemovedFromCatalog(t *testing.T) {
	kubeconfig := testcluster.ControlPlane(t).KubeconfigPath()
	rc := testcluster.RESTConfig(t)
	dir := t.TempDir()
	p := "gone"
	if r := kubeplug(t, kubeconfig, "", applyArgs(writeFixture(t, dir, p, 1))...); r.err != nil {
		t.Fatalf("version 1: %s", r)
	}
	if err := os.RemoveAll(filepath.Join(dir, "plugins")); err != nil {
		t.Fatal(err)
	}
	r := kubeplug(t, kubeconfig, "", "uninstall", "legacy-"+p, "app-"+p, "web-"+p)
	if r.err != nil || !strings.Contains(r.output, "uninstalled: ") {
		t.Fatalf("uninstall with the plugins' source gone: %s", r)
	}
	ns := "faults-" + p
	for _, ref := range []objRef{
		{Kind: "ConfigMap", Namespace: ns, Name: "legacy-a"}, {Kind: "ConfigMap", Namespace: ns, Name: "old-data"},
		{Kind: "ConfigMap", Namespace: ns, Name: "app-a"}, {Group: "apps", Kind: "Deployment", Namespace: ns, Name: "app"},
		{Kind: "ConfigMap", Namespace: ns, Name: "web-greeting"},
	} {
		if live(t, rc, ref) != nil {
			t.Errorf("%s still exists after uninstall", ref)
		}
	}
	if r := kubeplug(t, kubeconfig, "", "uninstall", "base-"+p); r.err != nil {
		t.Fatalf("uninstall base: %s", r)
	}
	recs := records(t, rc)
	for _, rec := range recs {
		if strings.HasSuffix(rec.Plugin, "-"+p) {
			t.Errorf("plugin %s still has a release record", rec.Plugin)
		}
	}
}

// objRef names an object by group, kind, namespace and name.
type objRef struct{ Group, Kind, Namespace, Name string }

func (r objRef) String() string {
	k := r.Kind
	if r.Group != "" {
		k += "." + r.Group
	}
	return k + "/" + r.Namespace + "/" + r.Name
}

var resources = map[string]schema.GroupVersionResource{
	"/ConfigMap":      {Version: "v1", Resource: "configmaps"},
	"/Service":        {Version: "v1", Resource: "services"},
	"/Namespace":      {Version: "v1", Resource: "namespaces"},
	"apps/Deployment": {Group: "apps", Version: "v1", Resource: "deployments"},
	"apiextensions.k8s.io/CustomResourceDefinition": {Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
}

func gvrOf(r objRef) schema.GroupVersionResource {
	if r.Kind == "Widget" {
		return schema.GroupVersionResource{Group: r.Group, Version: "v1", Resource: "widgets"}
	}
	return resources[r.Group+"/"+r.Kind]
}

func dyn(t *testing.T, rc *rest.Config) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// live returns the object, or nil when it does not exist.
func live(t *testing.T, rc *rest.Config, r objRef) *unstructured.Unstructured {
	t.Helper()
	ri := dyn(t, rc).Resource(gvrOf(r))
	var u *unstructured.Unstructured
	var err error
	if r.Namespace != "" {
		u, err = ri.Namespace(r.Namespace).Get(t.Context(), r.Name, metav1.GetOptions{})
	} else {
		u, err = ri.Get(t.Context(), r.Name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get %s: %v", r, err)
	}
	return u
}

func records(t *testing.T, rc *rest.Config) []*deploy.Record {
	t.Helper()
	d, err := deploy.New(rc, deploy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := d.Inventories(t.Context())
	if err != nil {
		t.Fatalf("read the release records: %v", err)
	}
	return recs
}

// divergence lists how case p's cluster differs from converged: version 2 of the
// fixture, no object outside every release record, the lease free, no Helm
// release pending. Problems with the lease are listed last, prefixed "lease: ".
func divergence(t *testing.T, rc *rest.Config, p string) []string {
	t.Helper()
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	ns := "faults-" + p
	group := p + ".faults.kubeplug.dev"
	field := func(r objRef, path ...string) string {
		u := live(t, rc, r)
		if u == nil {
			fail("%s is missing", r)
			return ""
		}
		v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
		return fmt.Sprint(v)
	}
	want := func(r objRef, value string, path ...string) {
		if got := field(r, path...); got != value && got != "" {
			fail("%s %s = %q, want %q", r, strings.Join(path, "."), got, value)
		}
	}
	cm := func(name string) objRef { return objRef{Kind: "ConfigMap", Namespace: ns, Name: name} }
	want(cm("base-config"), "2", "data", "release")
	want(cm("app-a"), "2", "data", "release")
	want(cm("app-c"), "2", "data", "release")
	for i := range appConfigMaps {
		want(cm(fmt.Sprintf("app-cm-%d", i)), "2", "data", "release")
	}
	if dep := live(t, rc, objRef{Group: "apps", Kind: "Deployment", Namespace: ns, Name: "app"}); dep == nil {
		fail("Deployment %s/app is missing", ns)
	} else if cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers"); len(cs) != 1 || cs[0].(map[string]any)["image"] != "registry.example/app:2" {
		fail("Deployment %s/app containers = %v, want image registry.example/app:2", ns, cs)
	}
	want(objRef{Group: group, Kind: "Widget", Namespace: ns, Name: "widget"}, "2", "spec", "size")
	want(cm("web-greeting"), "hello 2", "data", "greeting")
	want(cm("extra-greeting"), "extra", "data", "greeting")
	for _, gone := range []string{"app-b", "legacy-a", "legacy-b", "old-data"} {
		if live(t, rc, cm(gone)) != nil {
			fail("%s still exists; version 2 removed it", cm(gone))
		}
	}

	// Every plugin of version 2 is recorded Ready at 2.0.0, legacy is not recorded.
	recs := records(t, rc)
	recorded := map[string]bool{}
	phases := map[string]string{}
	for _, rec := range recs {
		phases[rec.Plugin] = rec.Phase + " " + rec.Version
		for _, o := range rec.Objects {
			recorded[objRef{Group: o.Group, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}.String()] = true
		}
	}
	for _, name := range []string{"base-", "app-", "web-"} {
		if got := phases[name+p]; got != deploy.PhaseReady+" 2.0.0" {
			fail("release record of %s%s: %q, want Ready 2.0.0", name, p, got)
		}
	}
	if got, ok := phases["legacy-"+p]; ok {
		fail("legacy-%s still has a release record (%s)", p, got)
	}

	// No orphan: every object of the case's namespace, and every object anywhere
	// that carries kubeplug's plugin label, is in some plugin's record. Objects of
	// earlier cases' namespaces being deleted are skipped.
	terminating := map[string]bool{}
	nsList, err := dyn(t, rc).Resource(resources["/Namespace"]).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nsList.Items {
		if n.GetDeletionTimestamp() != nil {
			terminating[n.GetName()] = true
		}
	}
	check := func(gvr schema.GroupVersionResource, kind string, namespace, selector string) {
		list, err := dyn(t, rc).Resource(gvr).Namespace(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatalf("list %s: %v", gvr.Resource, err)
		}
		for _, u := range list.Items {
			r := objRef{Group: gvr.Group, Kind: kind, Namespace: u.GetNamespace(), Name: u.GetName()}
			if u.GetDeletionTimestamp() != nil || terminating[u.GetNamespace()] || terminating[u.GetName()] && kind == "Namespace" || r.Name == "kube-root-ca.crt" {
				continue
			}
			if !recorded[r.String()] {
				fail("orphan: %s (labels %v) is in no plugin's release record", r, u.GetLabels())
			}
		}
	}
	kinds := map[string]string{"/ConfigMap": "ConfigMap", "/Service": "Service", "apps/Deployment": "Deployment"}
	for k, kind := range kinds {
		check(resources[k], kind, ns, "")
		check(resources[k], kind, "", deploy.LabelPlugin)
	}
	check(resources["/Namespace"], "Namespace", "", deploy.LabelPlugin)
	check(resources["apiextensions.k8s.io/CustomResourceDefinition"], "CustomResourceDefinition", "", deploy.LabelPlugin)
	check(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}, "Widget", ns, "")

	// The lease is free.
	held, err := testcluster.Client(t).CoordinationV1().Leases("kubeplug-system").Get(t.Context(), lease.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the lease: %v", err)
	}
	if h := held.Spec.HolderIdentity; h != nil && *h != "" {
		fail("lease: still held by %s", *h)
	}

	// No Helm release is pending, and each one's newest revision is deployed.
	secrets, err := testcluster.Client(t).CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		t.Fatal(err)
	}
	newest := map[string]metav1.Object{}
	for i := range secrets.Items {
		s := &secrets.Items[i]
		name := s.Labels["name"]
		if cur, ok := newest[name]; !ok || versionOf(s.Labels["version"]) > versionOf(cur.GetLabels()["version"]) {
			newest[name] = s
		}
	}
	for _, name := range []string{"web", "extra"} {
		s, ok := newest[name]
		if !ok {
			fail("Helm release %s/%s is missing", ns, name)
			continue
		}
		if st := s.GetLabels()["status"]; st != "deployed" {
			fail("Helm release %s/%s is %s, want deployed", ns, name, st)
		}
	}
	if _, ok := newest["old"]; ok {
		fail("Helm release %s/old of the removed plugin still exists", ns)
	}
	return problems
}

func versionOf(s string) int {
	n := 0
	_, _ = fmt.Sscan(s, &n)
	return n
}

// TestConcurrentApplies runs applies through the CLI while another run holds the
// lease: one that will not wait fails at once naming the holder; one that waits
// gets the lease when it is released. Two applies started together with waiting
// both succeed, one after the other.
func TestConcurrentApplies(t *testing.T) {
	kubeconfig := testcluster.ControlPlane(t).KubeconfigPath()
	rc := testcluster.RESTConfig(t)
	file := writeFixture(t, t.TempDir(), "cc", 1)
	d, err := deploy.New(rc, deploy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, release, err := lease.Lock(t.Context(), d.Client(), lease.Options{Operation: "apply", Identity: "other-host/4242/abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	r := kubeplug(t, kubeconfig, "", "apply", "-f", file, "--no-builtin", "--lock-timeout", "0")
	if r.err == nil || !strings.Contains(r.output, "another kubeplug operation holds the cluster's lease: apply by other-host/4242 since ") ||
		!strings.Contains(r.output, "wait with --lock-timeout or retry") {
		t.Errorf("apply while the lease is held: %s", r)
	}
	waited := make(chan run, 1)
	go func() { waited <- kubeplug(t, kubeconfig, "", applyArgs(file)...) }()
	time.Sleep(2 * time.Second)
	if err := release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := <-waited; r.err != nil {
		t.Errorf("apply waiting for the lease: %s", r)
	}

	both := make(chan run, 2)
	for range 2 {
		go func() { both <- kubeplug(t, kubeconfig, "", applyArgs(file)...) }()
	}
	for range 2 {
		if r := <-both; r.err != nil {
			t.Errorf("one of two concurrent applies: %s", r)
		}
	}
	if r := kubeplug(t, kubeconfig, "", "uninstall", "--cascade", "base-cc"); r.err != nil {
		t.Errorf("clean up: %s", r)
	}
}
