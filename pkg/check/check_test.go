package check_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/check"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// helperArg, as the first argument, makes the test binary act as an exec check
// (the helper-process pattern): the plugin package's executable is this binary.
const helperArg = "kubeplug-check-helper"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == helperArg {
		os.Exit(helper(os.Args[2:]))
	}
	os.Exit(testcluster.Run(m))
}

// wantValues checks the values the exec test gives its check, read from
// $KUBEPLUG_VALUES.
func wantValues() error {
	b, err := os.ReadFile(os.Getenv("KUBEPLUG_VALUES"))
	if err != nil {
		return err
	}
	var values struct {
		Replicas float64 `json:"replicas"`
		Token    string  `json:"token"`
	}
	if err := json.Unmarshal(b, &values); err != nil {
		return err
	}
	if values.Replicas != 3 || values.Token != "s3cret" {
		return fmt.Errorf("KUBEPLUG_VALUES %s holds %s", os.Getenv("KUBEPLUG_VALUES"), b)
	}
	return nil
}

// helper is an exec check: "env" reads the namespace named by its argument
// through $KUBECONFIG and checks the KUBEPLUG_ variables (with "values" after
// it, the values file too); "fail" writes to both
// streams and exits 3.
func helper(args []string) int {
	switch args[0] {
	case "env":
		cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if _, err := cs.CoreV1().Namespaces().Get(context.Background(), args[1], metav1.GetOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if len(args) > 2 && args[2] == "values" {
			if err := wantValues(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		if os.Getenv("KUBEPLUG_PLUGIN") != "demo" || os.Getenv("KUBEPLUG_CLUSTER") != "test" {
			fmt.Fprintf(os.Stderr, "KUBEPLUG_PLUGIN=%q KUBEPLUG_CLUSTER=%q\n", os.Getenv("KUBEPLUG_PLUGIN"), os.Getenv("KUBEPLUG_CLUSTER"))
			return 1
		}
		return 0
	case "fail":
		for i := range 30 {
			fmt.Printf("out line %d\n", i)
		}
		fmt.Fprintln(os.Stderr, "the widget is not frobbed")
		return 3
	}
	return 2
}

func runner(t *testing.T) *check.Runner {
	t.Helper()
	r, err := check.New(testcluster.RESTConfig(t), check.Options{Cluster: "test", Logger: testcluster.Logger(t), Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func configMap(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}
	if _, err := testcluster.Client(t).CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestWaitAndExpression(t *testing.T) {
	ns := testcluster.Namespace(t)
	configMap(t, ns, "one", map[string]string{"mode": "on"})
	configMap(t, ns, "two", map[string]string{"mode": "off"})
	// A Deployment no node can run: it never becomes available.
	one := int32(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "stuck"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "stuck"}},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"kubeplug.dev/no-such-node": "true"},
					Containers:   []corev1.Container{{Name: "c", Image: "example.invalid/c:1"}},
				},
			},
		},
	}
	if _, err := testcluster.Client(t).AppsV1().Deployments(ns).Create(t.Context(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Event is served by the core group and events.k8s.io: the core group wins.
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "tested", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "one"},
		Reason:         "Tested", Message: "a test event", Type: corev1.EventTypeNormal,
	}
	if _, err := testcluster.Client(t).CoreV1().Events(ns).Create(t.Context(), ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := func(name string) v1alpha1.ObjectRef {
		return v1alpha1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: name}
	}
	expr := func(o v1alpha1.ObjectRef, e string) *v1alpha1.ExpressionCheck {
		return &v1alpha1.ExpressionCheck{ObjectRef: o, Expression: e, Timeout: "1s"}
	}
	tests := []struct {
		name  string
		check v1alpha1.Check
		ok    bool
		// message is the whole message, with NS standing for the namespace.
		message string
	}{
		{"wait passes", v1alpha1.Check{Wait: &v1alpha1.ObjectWait{ObjectRef: cm("one"), Timeout: "1s"}},
			true, "ConfigMap NS/one is Current"},
		{"wait without apiVersion", v1alpha1.Check{Wait: &v1alpha1.ObjectWait{ObjectRef: v1alpha1.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: "one"}, Timeout: "1s"}},
			true, "ConfigMap NS/one is Current"},
		{"wait for a missing object", v1alpha1.Check{Wait: &v1alpha1.ObjectWait{ObjectRef: cm("missing"), Timeout: "1s"}},
			false, "ConfigMap NS/missing does not exist after 1s"},
		{"wait for an object that is not ready", v1alpha1.Check{Wait: &v1alpha1.ObjectWait{ObjectRef: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "stuck"}, Timeout: "1s"}},
			false, "Deployment NS/stuck is not ready after 1s: InProgress: "},
		{"expression over a kind of two groups", v1alpha1.Check{Expression: expr(v1alpha1.ObjectRef{Kind: "Event", Namespace: ns}, `objects.exists(e, e.reason == "Tested") && objects.all(e, e.apiVersion == "v1")`)},
			true, "true of Event objects in namespace NS ("},
		{"wait for a kind nobody serves", v1alpha1.Check{Wait: &v1alpha1.ObjectWait{ObjectRef: v1alpha1.ObjectRef{APIVersion: "example.com/v1", Kind: "Widget", Name: "w"}, Timeout: "1s"}},
			false, "Widget w is not ready after 1s: the API server serves no kind Widget in example.com/v1"},
		{"expression over an object", v1alpha1.Check{Name: "mode-on", Expression: expr(cm("one"), `object.data.mode == "on"`)},
			true, "true of ConfigMap NS/one"},
		{"expression false", v1alpha1.Check{Expression: expr(cm("two"), `object.data.mode == "on"`)},
			false, `expression object.data.mode == "on" is false after 1s: ConfigMap NS/two`},
		{"expression false with a message", v1alpha1.Check{Expression: &v1alpha1.ExpressionCheck{ObjectRef: cm("two"), Expression: `object.data.mode == "on"`, Message: "mode must be on", Timeout: "1s"}},
			false, `mode must be on (expression object.data.mode == "on") is false after 1s: ConfigMap NS/two`},
		{"expression error", v1alpha1.Check{Expression: expr(cm("one"), `object.data.missing == "on"`)},
			false, `expression object.data.missing == "on" cannot be evaluated after 1s: ConfigMap NS/one: no such key: missing`},
		{"expression over a missing object", v1alpha1.Check{Expression: expr(cm("missing"), `true`)},
			false, `expression true cannot be evaluated after 1s: ConfigMap NS/missing does not exist`},
		{"expression over a list", v1alpha1.Check{Expression: expr(v1alpha1.ObjectRef{Kind: "ConfigMap", Namespace: ns}, `objects.exists(o, o.metadata.name == "two") && objects.all(o, o.metadata.namespace == "`+ns+`")`)},
			true, "true of ConfigMap objects in namespace NS ("},
		{"expression over a list of a cluster-scoped kind", v1alpha1.Check{Expression: expr(v1alpha1.ObjectRef{Kind: "Namespace"}, `objects.exists(o, o.metadata.name == "`+ns+`")`)},
			true, ""},
		{"expression over an empty list", v1alpha1.Check{Expression: expr(v1alpha1.ObjectRef{Kind: "Secret", Namespace: ns}, `objects.size() > 0`)},
			false, "expression objects.size() > 0 is false after 1s: Secret objects in namespace NS (0)"},
	}
	var checks []v1alpha1.Check
	for _, tt := range tests {
		checks = append(checks, tt.check)
	}
	// One plugin with every check: they run at once.
	res := runner(t).Run(t.Context(), check.Plugin{Name: "demo", Checks: checks})
	if len(res) != len(tests) {
		t.Fatalf("%d results for %d checks", len(res), len(tests))
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := res[i]
			if r.Plugin != "demo" || r.Name != check.Name(tt.check) {
				t.Errorf("result names %s %q", r.Plugin, r.Name)
			}
			want := strings.ReplaceAll(tt.message, "NS", ns)
			if r.OK != tt.ok || !strings.HasPrefix(r.Message, want) {
				t.Errorf("ok=%v message %q\nwant ok=%v message %q", r.OK, r.Message, tt.ok, want)
			}
		})
	}
}

func TestNames(t *testing.T) {
	for _, tt := range []struct {
		c    v1alpha1.Check
		want string
	}{
		{v1alpha1.Check{Name: "api", Wait: &v1alpha1.ObjectWait{}}, "api"},
		{v1alpha1.Check{Wait: &v1alpha1.ObjectWait{ObjectRef: v1alpha1.ObjectRef{Kind: "Deployment", Namespace: "kube-system", Name: "metrics-server"}}}, "wait Deployment/kube-system/metrics-server"},
		{v1alpha1.Check{Expression: &v1alpha1.ExpressionCheck{ObjectRef: v1alpha1.ObjectRef{Kind: "IngressClass", Name: "nginx"}}}, "expression IngressClass/nginx"},
		{v1alpha1.Check{Exec: &v1alpha1.ExecCheck{Command: []string{"bin/check", "--all"}}}, "exec bin/check --all"},
	} {
		if got := check.Name(tt.c); got != tt.want {
			t.Errorf("Name = %q, want %q", got, tt.want)
		}
	}
}

func TestDiagnostics(t *testing.T) {
	l := check.Diagnostics([]check.Result{
		{Plugin: "a", Name: "fine", OK: true},
		{Plugin: "metrics-server", Name: "api-available", Message: "expression x is false after 2m: APIService v1beta1.metrics.k8s.io"},
	})
	if len(l) != 1 || !l.HasFatal() {
		t.Fatalf("diagnostics: %v", l)
	}
	want := `plugin metrics-server: validate check "api-available": expression x is false after 2m: APIService v1beta1.metrics.k8s.io`
	if got := l[0].String(); !strings.Contains(got, want) {
		t.Errorf("diagnostic %q, want it to contain %q", got, want)
	}
}

// execPackage returns a plugin package directory holding this test binary as
// bin/check and a shell script as bin/hang.
func execPackage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(dir, "bin", "check")); err != nil {
		t.Fatal(err)
	}
	// hang writes its process group to the file named by its argument, starts a
	// child that also hangs, and hangs.
	hang := "#!/bin/sh\necho \"$$\" > \"$1\"\necho waiting\nsleep 600 &\nsleep 600\n"
	if err := os.WriteFile(filepath.Join(dir, "bin", "hang"), []byte(hang), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestExec(t *testing.T) {
	ns := testcluster.Namespace(t)
	dir := execPackage(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	exec := func(timeout string, argv ...string) v1alpha1.Check {
		return v1alpha1.Check{Exec: &v1alpha1.ExecCheck{Command: argv, Timeout: timeout}}
	}
	checks := []v1alpha1.Check{
		exec("30s", "bin/check", helperArg, "env", ns, "values"),
		exec("1s", "bin/check", helperArg, "fail"),
		exec("2s", "bin/hang", pidFile),
		exec("1s", "bin/none"),
	}
	values := map[string]any{"replicas": 3, "token": "s3cret"}
	res := runner(t).Run(t.Context(), check.Plugin{Name: "demo", Checks: checks, FS: os.DirFS(dir), Dir: dir, Values: values})

	if !res[0].OK {
		t.Errorf("exec reading the cluster through KUBECONFIG and its values through KUBEPLUG_VALUES failed: %s", res[0].Message)
	}

	fail := res[1]
	for _, want := range []string{
		"exec bin/check " + helperArg + " fail exited with status 3 after 1s: stdout:\n    out line 10\n",
		"out line 29\nstderr:\n    the widget is not frobbed",
	} {
		if fail.OK || !strings.Contains(fail.Message, want) {
			t.Errorf("failing exec: ok=%v message:\n%s\nwant it to contain:\n%s", fail.OK, fail.Message, want)
		}
	}
	if strings.Contains(fail.Message, "out line 9\n") {
		t.Errorf("failing exec: the message has more than the tail of stdout:\n%s", fail.Message)
	}

	hang := res[2]
	if want := "exec bin/hang " + pidFile + " did not finish and was killed after 2s: stdout:\n    waiting"; hang.OK || hang.Message != want {
		t.Errorf("hanging exec: ok=%v message %q, want %q", hang.OK, hang.Message, want)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// SIGKILL is delivered asynchronously: give the kernel a moment.
	left := liveProcesses(t, pgid)
	for i := 0; i < 50 && len(left) > 0; i++ {
		time.Sleep(100 * time.Millisecond)
		left = liveProcesses(t, pgid)
	}
	if len(left) > 0 {
		t.Errorf("processes of the hanging exec's group %d are still running: %v", pgid, left)
	}

	if want := "exec bin/none: read executable bin/none: "; res[3].OK || !strings.HasPrefix(res[3].Message, want) {
		t.Errorf("missing executable: ok=%v message %q", res[3].OK, res[3].Message)
	}
}

// TestExecPinned runs an exec check only when the executable matches the digest
// plugin.yaml pins it to.
func TestExecPinned(t *testing.T) {
	ns := testcluster.Namespace(t)
	dir := execPackage(t)
	self, err := os.ReadFile(filepath.Join(dir, "bin", "check"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(self)
	good := hex.EncodeToString(sum[:])
	bad := strings.Repeat("0", 64)
	c := []v1alpha1.Check{{Exec: &v1alpha1.ExecCheck{Command: []string{"bin/check", helperArg, "env", ns}}}}
	r := runner(t)
	if res := r.Run(t.Context(), check.Plugin{Name: "demo", Checks: c, FS: os.DirFS(dir), Pins: map[string]string{"bin/check": good}}); !res[0].OK {
		t.Errorf("pinned exec with the right digest: %s", res[0].Message)
	}
	res := r.Run(t.Context(), check.Plugin{Name: "demo", Checks: c, FS: os.DirFS(dir), Pins: map[string]string{"bin/check": bad}})
	if want := "exec bin/check " + helperArg + " env " + ns + ": refusing to run bin/check: its sha256 is " + good; res[0].OK || !strings.HasPrefix(res[0].Message, want) {
		t.Errorf("pinned exec with the wrong digest: ok=%v message %q", res[0].OK, res[0].Message)
	}
}

// TestDeadlineWins: a run's context deadline ends checks with longer timeouts.
func TestDeadlineWins(t *testing.T) {
	ns := testcluster.Namespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	c := []v1alpha1.Check{{Wait: &v1alpha1.ObjectWait{ObjectRef: v1alpha1.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: "missing"}}}}
	res := runner(t).Run(ctx, check.Plugin{Name: "demo", Checks: c})
	want := "ConfigMap " + ns + "/missing does not exist after "
	if res[0].OK || !strings.HasPrefix(res[0].Message, want) || !strings.HasSuffix(res[0].Message, "(the deadline of the whole run)") {
		t.Errorf("ok=%v message %q", res[0].OK, res[0].Message)
	}
}

// liveProcesses returns the processes of group pgid that are not zombies.
func liveProcesses(t *testing.T, pgid int) []string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		t.Skip("no /proc to look for processes in")
	}
	var left []string
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		fields := strings.Fields(s[i+1:])
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		if fields[2] == strconv.Itoa(pgid) {
			left = append(left, s[:i+1])
		}
	}
	return left
}

// TestFirstRetryComesSoon: a check that fails its first attempt tries again
// a tenth of Interval later, doubling up to Interval, so what turns true a
// moment after the first look (up's dns-ready, once the EndpointSlice
// controller has seen CoreDNS Ready) passes well before a whole Interval.
func TestFirstRetryComesSoon(t *testing.T) {
	ns := testcluster.Namespace(t)
	const interval = 5 * time.Second
	r, err := check.New(testcluster.RESTConfig(t), check.Options{Cluster: "test", Logger: testcluster.Logger(t), Interval: interval})
	if err != nil {
		t.Fatal(err)
	}
	cs := testcluster.Client(t)
	go func() {
		time.Sleep(100 * time.Millisecond)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later", Namespace: ns}, Data: map[string]string{"mode": "on"}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Error(err)
		}
	}()
	res := r.Run(t.Context(), check.Plugin{Name: "demo", Checks: []v1alpha1.Check{{Expression: &v1alpha1.ExpressionCheck{
		ObjectRef:  v1alpha1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "later"},
		Expression: `object.data.mode == "on"`, Timeout: "30s",
	}}}})
	if !res[0].OK || res[0].Duration >= interval {
		t.Errorf("a check true 0.1 s after its first attempt: ok=%v after %s (%s), want it passed before one Interval (%s)", res[0].OK, res[0].Duration, res[0].Message, interval)
	}
}
