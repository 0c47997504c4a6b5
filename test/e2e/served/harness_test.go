package served

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/internal/portblock"
	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/sdk/apiserver"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// env is a served API of the test's own: a group named after the test's
// namespace, the widgets-api plugin applied by kubeplug (certificates,
// APIService, RBAC), and a server in this process behind an ExternalName
// Service on a port of its own.
type env struct {
	t               testing.TB
	ns, group       string
	plugin          string
	kubeconfig, dir string
	certDir         string
	port            string
	dyn             dynamic.Interface
	applied         chan string
	requests        *requestLog
	// unthrottled lifts the client-side rate limit of the server's client
	// (benchmarks: every API request is a storage request).
	unthrottled bool
}

// newEnv writes the plugin, starts kubeplug apply in the background (the
// plugin is ready only once its API is Available, which needs the server this
// test starts) and waits for the serving certificate. extraManifests are
// added to the plugin's manifests (NS, GROUP and PORT substituted).
func newEnv(t testing.TB, extraManifests string) *env {
	t.Helper()
	return newPluginEnv(t, "widgets-api", pluginYAML, manifestsYAML+extraManifests)
}

// newPluginEnv is newEnv for any plugin that serves through a Service named
// after it (the serving certificate Secret waited for is the Service's):
// pluginYAML and manifests with NS, GROUP and PORT substituted.
func newPluginEnv(t testing.TB, plugin, pluginYAML, manifests string) *env {
	t.Helper()
	e := newBareEnv(t, plugin)
	subst := e.subst()
	write(t, filepath.Join(e.dir, "plugins", plugin, "plugin.yaml"), subst.Replace(pluginYAML))
	write(t, filepath.Join(e.dir, "plugins", plugin, "manifests/server.yaml"), subst.Replace(manifests))
	write(t, filepath.Join(e.dir, "plugins/other/plugin.yaml"), otherYAML)
	write(t, filepath.Join(e.dir, "plugins/other/cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: "+e.ns+"}\ndata: {a: b}\n")
	t.Cleanup(func() {
		// One at a time: "other" is installed by some tests only, and an
		// uninstall naming a plugin that is not installed removes nothing.
		for _, p := range []string{plugin, "other"} {
			out, code := e.kubeplug(context.WithoutCancel(t.Context()), "uninstall", p)
			if code != 0 && !strings.Contains(out, "is not installed") {
				t.Logf("cleanup: %s", out)
			}
		}
	})
	go func() {
		out, code := e.kubeplug(t.Context(), "apply", "-f", e.cluster(plugin), "--timeout", "2m")
		e.applied <- fmt.Sprintf("exit %d\n%s", code, out)
	}()
	e.waitCert("")
	return e
}

// subst replaces NS, GROUP and PORT in a plugin's files.
func (e *env) subst() *strings.Replacer {
	return strings.NewReplacer("GROUP", e.group, "NS", e.ns, "PORT", e.port)
}

// newBareEnv is an env with its namespace, group and port, and nothing
// applied: the test installs the plugin itself.
func newBareEnv(t testing.TB, plugin string) *env {
	t.Helper()
	ns := testcluster.Namespace(t)
	e := &env{t: t, ns: ns, plugin: plugin, group: strings.ReplaceAll(ns, "-", "") + ".example.com",
		kubeconfig: testcluster.ControlPlane(t).KubeconfigPath(), dir: t.TempDir(), certDir: t.TempDir(),
		applied: make(chan string, 1), requests: &requestLog{}}
	// The server may stop and start again on the same port: a port of a block
	// of its own (internal/portblock, outside the kernel's ephemeral range)
	// stays free meanwhile, where one the kernel chose for port 0 was taken by
	// another process once (bind: address already in use).
	blk, err := portblock.Acquire(t.TempDir(), nil, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(blk.Release)
	p := blk.Ports()[0]
	blk.Hand(p)
	e.port = strconv.Itoa(p)
	if e.dyn, err = dynamic.NewForConfig(testcluster.RESTConfig(t)); err != nil {
		t.Fatal(err)
	}
	return e
}

// waitCert waits for the serving certificate Secret to hold a certificate
// other than old (PEM; "" for any), writes it into certDir as the kubelet
// would, and returns it.
func (e *env) waitCert(old string) string {
	e.t.Helper()
	secretGVR := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := e.dyn.Resource(secretGVR).Namespace(e.ns).Get(e.t.Context(), e.plugin+"-serving-cert", metav1.GetOptions{})
		if err == nil {
			crt, _, _ := unstructured.NestedString(s.Object, "data", "tls.crt")
			key, _, _ := unstructured.NestedString(s.Object, "data", "tls.key")
			crtPEM, _ := base64.StdEncoding.DecodeString(crt)
			if crt != "" && key != "" && string(crtPEM) != old {
				keyPEM, _ := base64.StdEncoding.DecodeString(key)
				write(e.t, filepath.Join(e.certDir, "tls.key"), string(keyPEM))
				write(e.t, filepath.Join(e.certDir, "tls.crt"), string(crtPEM))
				return string(crtPEM)
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no new serving certificate in Secret %s-serving-cert after a minute: %v", e.plugin, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cluster writes a Cluster enabling the plugins and returns its path.
func (e *env) cluster(plugins ...string) string {
	f := filepath.Join(e.dir, "cluster-"+strings.Join(plugins, "-")+".yaml")
	body := "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: served}\nspec:\n  kubernetesVersion: 1.37.1\n  plugins:\n    sources: [{dir: ./plugins}]\n    enabled:\n"
	for _, p := range plugins {
		body += "      - name: " + p + "\n"
	}
	write(e.t, f, body)
	return f
}

func (e *env) kubeplug(ctx context.Context, args ...string) (string, int) {
	var out bytes.Buffer
	args = append(args, "--kubeconfig", e.kubeconfig, "--no-progress")
	code := cmd.Main(ctx, args, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &out})
	return out.String(), code
}

// kubectl runs the kubectl of the localcluster build; its stdout and stderr
// together.
func (e *env) kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(testcluster.ControlPlane(e.t).BinDir(), "kubectl"), append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// file writes a file under the test's directory and returns its path.
func (e *env) file(name, body string) string {
	p := filepath.Join(e.dir, name)
	write(e.t, p, body)
	return p
}

// listen listens on the env's port.
func (e *env) listen() net.Listener {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", e.port))
	if err != nil {
		e.t.Fatal(err)
	}
	return ln
}

// serve runs the API server on ln with the env's group, storage, certificate
// and request log filled in; stop ends it and reports its error.
func (e *env) serve(ln net.Listener, opts apiserver.Options) (stop func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.t.Context())
	opts.Group, opts.Version = e.group, "v1alpha1"
	// As the server's ServiceAccount, with the RBAC kubeplug generates for
	// it: the storage's admission policy refuses every other writer.
	cfg := rest.CopyConfig(testcluster.RESTConfig(e.t))
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + e.ns + ":widgets-api", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + e.ns, "system:authenticated"}}
	if e.unthrottled {
		cfg.QPS = -1
	}
	opts.Client, opts.Storage = testcluster.NewClient(e.t, cfg), e.ns
	opts.CertFile, opts.KeyFile = filepath.Join(e.certDir, "tls.crt"), filepath.Join(e.certDir, "tls.key")
	opts.Logger = slog.New(slog.NewJSONHandler(e.requests, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := apiserver.New(ctx, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("server: %v", err)
		}
	}
}

// waitApplied waits for the background apply newEnv started.
func (e *env) waitApplied() {
	e.t.Helper()
	select {
	case out := <-e.applied:
		if !strings.HasPrefix(out, "exit 0") {
			e.t.Fatalf("apply: %s", out)
		}
	case <-time.After(3 * time.Minute):
		e.t.Fatal("apply did not finish")
	}
}

// requestLog keeps what the server logs: one JSON record a line.
type requestLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *requestLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// lines returns the records logged since the last reset holding every part.
func (l *requestLog) lines(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range strings.SplitSeq(l.buf.String(), "\n") {
		ok := line != ""
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

func (l *requestLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
}

func write(t testing.TB, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
