package dashboard

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/dashboard"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

var updateDocs = flag.Bool("update-docs", false, "copy the cluster page's screenshot to docs/images/dashboard.png")

// token is the quickstart's sensitive value (hello's /apiToken, from
// HELLO_API_TOKEN): markup and quotes in it, so that an escaped copy is
// caught as well as a raw one.
const token = `kp-dash-t0ken-<i>&"9f3</i>`

// tokenForms are what no response of the dashboard may hold: the sensitive
// value's distinctive part (raw, HTML- or JSON-escaped, it contains this) and
// the base64 the API server keeps it in.
var tokenForms = []string{"kp-dash-t0ken", base64.StdEncoding.EncodeToString([]byte(token))}

// recorder keeps every response the dashboard sends, event streams included.
type recorder struct {
	mu   sync.Mutex
	sent []*bytes.Buffer
	next http.Handler
}

type teeWriter struct {
	http.ResponseWriter
	buf *bytes.Buffer
	mu  *sync.Mutex
}

func (w teeWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.buf.Write(p)
	w.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

func (w teeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	buf := &bytes.Buffer{}
	rec.mu.Lock()
	rec.sent = append(rec.sent, buf)
	rec.mu.Unlock()
	tw := teeWriter{ResponseWriter: w, buf: buf, mu: &rec.mu}
	rec.next.ServeHTTP(tw, r)
	rec.mu.Lock()
	for k, v := range w.Header() {
		fmt.Fprintf(buf, "\n%s: %s", k, strings.Join(v, ", "))
	}
	rec.mu.Unlock()
}

// leaks returns, per secret found, how many responses held it.
func (rec *recorder) leaks(secrets []string) (int, map[string]int) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	found := map[string]int{}
	for _, b := range rec.sent {
		for _, s := range secrets {
			if bytes.Contains(b.Bytes(), []byte(s)) {
				found[s]++
			}
		}
	}
	return len(rec.sent), found
}

// serve starts a dashboard of the shared cluster as rc's user, with the
// cluster file, behind a recorder; it stops when the test ends.
func serve(t *testing.T, cfg *action.Config, rc *rest.Config, cl *config.Cluster, rec *recorder) string {
	t.Helper()
	srv, err := dashboard.New(dashboard.Options{Config: cfg, Target: action.KubeconfigTarget{RESTConfig: rc}, Cluster: cl, RollbackTimeout: 2 * time.Minute, Logger: testcluster.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Run(ctx) }()
	rec.next = srv
	hs := httptest.NewUnstartedServer(rec)
	hs.Config.BaseContext = func(net.Listener) context.Context { return ctx }
	hs.Start()
	t.Cleanup(func() { cancel(); hs.Close(); <-done })
	return hs.URL
}

// tab is the browser tab the test drives. Its context is chromedp's (the
// browser lives as long as it), held apart from the tests' own contexts.
type tab struct{ ctx context.Context }

// browser starts headless Chromium for the test. Without it the test is
// skipped, except under CI (CI=true), where a missing browser is a failure:
// make browser installs it.
func browser(t *testing.T) tab {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is not installed (make browser installs it): %v", err)
		}
		t.Skipf("chromium is not installed (make browser installs it): %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	// The first call starts the browser, which lives as long as ctx: no timeout here.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return tab{ctx}
}

// do runs browser steps with a bound on how long they may take.
func do(t *testing.T, b tab, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// eval is the value of the JavaScript expression on the page.
func eval[T any](t *testing.T, b tab, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// shot saves a screenshot of the page as NAME.png among the test's
// artifacts (go test -artifacts keeps them) and returns its path.
func shot(t *testing.T, b tab, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
	return p
}

// quickstart writes the quickstart with greeting as hello's greeting, its
// plugins by absolute path, to dir/name and loads it.
func quickstart(t *testing.T, dir, name, greeting string) (string, *config.Cluster) {
	t.Helper()
	b, err := os.ReadFile("../../../examples/quickstart/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	plugins, err := filepath.Abs("../../../examples/quickstart/plugins")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "- dir: ./plugins", "- dir: "+plugins, 1)
	s = strings.Replace(s, "greeting: Hello from kubeplug", "greeting: "+greeting, 1)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	cl, l := config.Load(p)
	if cl == nil {
		t.Fatal(l)
	}
	return p, cl
}

// text is the visible text of the element sel (a CSS selector) selects.
func text(t *testing.T, b tab, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return v
}

// waitJS waits until the JavaScript expression is true on the page.
func waitJS(t *testing.T, b tab, d time.Duration, expr string) {
	t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(d))); err != nil {
		t.Fatalf("waiting for %s: %v", expr, err)
	}
}

// sseOpen is true once the page's event stream (htmx's sse extension on the
// body) is open.
const sseOpen = `!!document.body["htmx-internal-data"] && !!document.body["htmx-internal-data"].sseEventSource && document.body["htmx-internal-data"].sseEventSource.readyState === 1`

// cell is the JavaScript text of column n of plugin's row on the cluster page.
func cell(plugin string, n int) string {
	return fmt.Sprintf(`((document.querySelector('#plugins-table tr[data-plugin=%q] > :nth-child(%d)')||{}).textContent||"").trim()`, plugin, n)
}

// TestDashboard walks the dashboard through the quickstart on the local
// control plane. The steps share one cluster and build on each other.
func TestDashboard(t *testing.T) {
	bctx := browser(t)
	dir := t.TempDir()
	env := func(k string) (string, bool) {
		if k == "HELLO_API_TOKEN" {
			return token, true
		}
		return "", false
	}
	cfg := &action.Config{Env: env, Logger: testcluster.Logger(t)}
	_, cl1 := quickstart(t, dir, "cluster.yaml", "Hello from the dashboard test")
	v2, _ := quickstart(t, dir, "cluster-v2.yaml", "A changed greeting")
	admin := testcluster.RESTConfig(t)
	kubeconfig := testcluster.ControlPlane(t).KubeconfigPath()

	apply := action.NewApply(cfg)
	apply.Target.RESTConfig = admin
	apply.Timeout = 3 * time.Minute
	if _, l := apply.Run(t.Context(), cl1); l.HasFatal() {
		t.Fatal(l)
	}

	// What no response may hold: the token, and the bad-input corpus' secrets.
	secrets := append(corpusSecrets(t), tokenForms...)
	rec := &recorder{}
	url := serve(t, cfg, admin, cl1, rec)

	t.Run("quickstart plugins and readiness", func(t *testing.T) {
		// One node is in the quickstart's edge pool, as up labels it: its row
		// lists what the plan contributes to the pool, hello's hook included.
		node := edgeNode(t)
		do(t, bctx, time.Minute, chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.CSS("#plugins-table")))
		if row := text(t, bctx, fmt.Sprintf(`#nodes tr[data-node=%q]`, node)); !strings.Contains(row, "edge") || !strings.Contains(row, "nodes.hook beforeNodeup/greet (hello)") || !strings.Contains(row, "nodes.label hello.kubeplug.dev/greeted (hello)") {
			t.Errorf("node %s's row: %q", node, row)
		}
		for _, p := range []string{"control-plane", "cluster-dns", "metrics-server", "hello"} {
			waitJS(t, bctx, 30*time.Second, cell(p, 3)+` === "Ready"`)
			ready := eval[string](t, bctx, cell(p, 4))
			// control-plane contributes flags only: 0/0 is all of it.
			if n, m, ok := strings.Cut(ready, "/"); !ok || n != m || n == "0" && p != "control-plane" {
				t.Errorf("%s: ready %q, want N/N", p, ready)
			}
		}
		if d := text(t, bctx, `#plugins-table tr[data-plugin="hello"] td.drift`); strings.TrimSpace(d) != "0" {
			t.Errorf("hello drift right after its apply = %q, want 0", d)
		}
		if got := text(t, bctx, "#nodes-h"); got != "Nodes" {
			t.Errorf("nodes heading %q", got)
		}
		shot(t, bctx, "cluster")
		if *updateDocs {
			b, err := os.ReadFile(filepath.Join(t.ArtifactDir(), "cluster.png"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile("../../../docs/images/dashboard.png", b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("an apply in another process appears live", func(t *testing.T) {
		do(t, bctx, time.Minute, chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.CSS("#plugins-table")),
			chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
		// The page listens before the apply starts.
		waitJS(t, bctx, 10*time.Second, sseOpen)
		cmd := exec.Command(os.Args[0], "apply", "-f", v2, "--kubeconfig", kubeconfig, "--timeout", "3m") //nolint:gosec // this test binary as kubeplug
		cmd.Env = append(os.Environ(), runCLI+"=1", "HELLO_API_TOKEN="+token)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubeplug apply in another process: %v\n%s", err, out)
		}
		waitJS(t, bctx, 90*time.Second, cell("hello", 7)+`.includes("revision 2")`)
		// Against the cluster file the dashboard was given, hello's ConfigMap
		// now differs: drift, shown live too.
		waitJS(t, bctx, 60*time.Second, cell("hello", 6)+`.includes("ConfigMap/hello/hello")`)
		if !eval[bool](t, bctx, `window.notReloaded === true`) {
			t.Error("the page was reloaded; the update should have come over the event stream")
		}
		shot(t, bctx, "cluster-live")
	})

	t.Run("a rollback with confirmation is recorded", func(t *testing.T) {
		do(t, bctx, time.Minute, chromedp.Navigate(url+"/plugins/hello"), chromedp.WaitVisible(chromedp.CSS("#revisions")))
		shot(t, bctx, "plugin")
		do(t, bctx, time.Minute, chromedp.Click(chromedp.CSS(`#revisions tr[data-revision="1"] a.button`)), chromedp.WaitVisible(chromedp.CSS("#confirm")))
		if q := text(t, bctx, "form.confirm p"); !strings.Contains(q, "Roll back hello to revision 1") {
			t.Errorf("confirmation says %q", q)
		}
		shot(t, bctx, "rollback-confirm")
		do(t, bctx, 3*time.Minute, chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("p.done")))
		if got := text(t, bctx, "p.done"); !strings.Contains(got, "rollback to 1") || !strings.Contains(got, "recorded as revision 3") {
			t.Errorf("after the rollback the page says %q", got)
		}
		h := action.NewHistory(cfg)
		h.Target.RESTConfig = admin
		revs, l := h.Run(t.Context(), "hello")
		if l.HasFatal() || len(revs) != 3 || revs[2].Description != "rollback to 1" {
			t.Errorf("history after the rollback: %+v %v", revs, l)
		}
		// The file's content again: no drift.
		do(t, bctx, time.Minute, chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.CSS("#plugins-table")))
		if d := text(t, bctx, `#plugins-table tr[data-plugin="hello"] td.drift`); strings.TrimSpace(d) != "0" {
			t.Errorf("hello drift after rolling back to the file's revision = %q, want 0", d)
		}
	})

	t.Run("a drifted object shows as drift, live", func(t *testing.T) {
		do(t, bctx, time.Minute, chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.CSS("#plugins-table")),
			chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
		waitJS(t, bctx, 10*time.Second, sseOpen)
		// Someone edits an object kubeplug applied: the page, watching the
		// plugins' objects, shows the drift without a reload.
		patch := []byte(`{"data":{"greeting":"changed by hand"}}`)
		if _, err := testcluster.Client(t).CoreV1().ConfigMaps("hello").Patch(t.Context(), "hello", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
			t.Fatal(err)
		}
		waitJS(t, bctx, 60*time.Second, cell("hello", 6)+`.startsWith("1") && `+cell("hello", 6)+`.includes("ConfigMap/hello/hello")`)
		if !eval[bool](t, bctx, `window.notReloaded === true`) {
			t.Error("the page was reloaded; the drift should have come over the event stream")
		}
		do(t, bctx, time.Minute, chromedp.Navigate(url+"/plugins/hello"), chromedp.WaitVisible(chromedp.CSS("#objects")))
		state := eval[string](t, bctx, `[...document.querySelectorAll('#objects tbody tr')].filter(r => r.querySelector('th').textContent === "ConfigMap/hello/hello").map(r => r.querySelector('td').textContent).join()`)
		if state != "Drifted" {
			t.Errorf("ConfigMap/hello/hello's state on the plugin page = %q, want Drifted", state)
		}
		shot(t, bctx, "plugin-drift")
	})

	t.Run("a user without rights is refused", func(t *testing.T) {
		viewer := limitedUser(t)
		vrec := &recorder{}
		vurl := serve(t, cfg, viewer, cl1, vrec)
		do(t, bctx, time.Minute, chromedp.Navigate(vurl+"/plugins/hello/rollback?revision=2"), chromedp.WaitVisible(chromedp.CSS("#confirm")))
		do(t, bctx, time.Minute, chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS(".refused")))
		msg := text(t, bctx, ".refused")
		if !strings.Contains(msg, "forbidden") || !strings.Contains(msg, "dash-viewer") {
			t.Errorf("the refusal says %q; want the API server's forbidden naming the user", msg)
		}
		shot(t, bctx, "rollback-refused")
		h := action.NewHistory(cfg)
		h.Target.RESTConfig = admin
		if revs, _ := h.Run(t.Context(), "hello"); len(revs) != 3 {
			t.Errorf("the refused rollback recorded something: %d revisions", len(revs))
		}
		if n, found := vrec.leaks(secrets); len(found) > 0 {
			t.Errorf("%d responses to the limited user hold secrets: %v", n, found)
		}
	})

	t.Run("plan and catalogs pages", func(t *testing.T) {
		do(t, bctx, time.Minute, chromedp.Navigate(url+"/plan"), chromedp.WaitVisible(chromedp.CSS("figure.plan svg")))
		boxes := eval[int](t, bctx, `document.querySelectorAll('figure.plan g.plugin').length`)
		if boxes != 4 {
			t.Errorf("the plan shows %d plugins, want 4", boxes)
		}
		shot(t, bctx, "plan")
		do(t, bctx, time.Minute, chromedp.Navigate(url+"/catalogs"), chromedp.WaitVisible(chromedp.CSS("#catalog")))
		// The quickstart's sources have no trust policy: nothing is verified.
		if c := text(t, bctx, "#catalog"); !strings.Contains(c, "metrics-server") || !strings.Contains(c, "hello") || !strings.Contains(c, "not verified") {
			t.Errorf("catalogs page: %q", c)
		}
		shot(t, bctx, "catalogs")
		// The keyboard's first stop is the skip link, and it shows when focused.
		do(t, bctx, 10*time.Second, chromedp.KeyEvent("\t"))
		if got := eval[string](t, bctx, `document.activeElement.textContent + " " + (document.activeElement.getBoundingClientRect().left >= 0)`); got != "Skip to content true" {
			t.Errorf("after one Tab the focus is on %q, want the visible skip link", got)
		}
	})

	t.Run("no response holds a secret", func(t *testing.T) {
		n, found := rec.leaks(secrets)
		if n < 10 {
			t.Errorf("only %d responses recorded", n)
		}
		if len(found) > 0 {
			t.Errorf("responses hold secrets: %v", found)
		}
		// The corpus is in the cluster: the check would see a leak.
		sec, err := testcluster.Client(t).CoreV1().Secrets("hello").Get(t.Context(), "hello-token", metav1.GetOptions{})
		if err != nil || string(sec.Data["token"]) != token {
			t.Errorf("the sensitive value is not in the cluster, so the check proves nothing: %v", err)
		}
	})
}

// edgeNode labels a node of the shared cluster as one of the quickstart's
// edge pool (kubeplug.dev/pool, as up labels its machines) until the test
// ends, and returns its name.
func edgeNode(t *testing.T) string {
	t.Helper()
	c := testcluster.Client(t)
	nodes, err := c.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v", err)
	}
	name := nodes.Items[0].Name
	label := func(v any) {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{"kubeplug.dev/pool": v}}})
		if _, err := c.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
			t.Errorf("labelling node %s: %v", name, err)
		}
	}
	label("edge")
	t.Cleanup(func() { label(nil) })
	return name
}

// limitedUser makes a user, dash-viewer, who may read everything and change
// nothing, and returns the shared cluster's config impersonating it (as
// kubectl --as does).
func limitedUser(t *testing.T) *rest.Config {
	t.Helper()
	c := testcluster.Client(t)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "dash-viewer"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := c.RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dash-viewer"}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "dash-viewer"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "dash-viewer"}}}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = c.RbacV1().ClusterRoleBindings().Delete(ctx, "dash-viewer", metav1.DeleteOptions{})
		_ = c.RbacV1().ClusterRoles().Delete(ctx, "dash-viewer", metav1.DeleteOptions{})
	})
	rc := rest.CopyConfig(testcluster.RESTConfig(t))
	rc.Impersonate = rest.ImpersonationConfig{UserName: "dash-viewer", Groups: []string{"system:authenticated"}}
	return rc
}
