package testcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
)

// DefaultNodes is how many simulated Ready nodes Run adds when Config.Nodes is 0.
const DefaultNodes = 2

// Config configures the shared control plane started by RunWith. The zero value
// is valid.
type Config struct {
	// ControlPlane is passed to controlplane.Start. Default: its zero value,
	// except that a nil Logger logs at warning level to stderr.
	ControlPlane controlplane.Options
	// Nodes is the number of simulated nodes added after start; negative means
	// none. Default: DefaultNodes.
	Nodes int
	// Timeout bounds starting the cluster and adding the nodes.
	// Default: controlplane.DefaultStartTimeout.
	Timeout time.Duration
}

// errNotStarted is reported to tests that ask for the shared cluster without a
// TestMain that called Run.
var errNotStarted = errors.New("testcluster: the shared control plane is not running; call testcluster.Run(m) from TestMain")

// shared is the one control plane of this test binary. It is package state by
// necessity: TestMain and the tests only share the process.
var shared struct {
	mu  sync.Mutex
	cp  *controlplane.ControlPlane
	err error
}

// Run is RunWith with the default Config.
func Run(m *testing.M) int { return RunWith(m, Config{}) }

// RunWith starts the shared control plane, runs the tests and stops it; it
// returns the exit code for os.Exit. If the cluster cannot start, the tests
// still run and every test that asks for the cluster fails with the start
// error, and the exit code is non-zero either way.
func RunWith(m *testing.M, cfg Config) int {
	if cfg.ControlPlane.Logger == nil {
		cfg.ControlPlane.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = DefaultNodes
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = controlplane.DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	cp, err := start(ctx, cfg.ControlPlane, cfg.Nodes)
	cancel()
	shared.mu.Lock()
	shared.cp, shared.err = cp, err
	shared.mu.Unlock()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster: %v\n", err)
	}

	code := m.Run()

	if cp != nil {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), time.Minute)
		defer stopCancel()
		if err := cp.Stop(stopCtx); err != nil {
			fmt.Fprintf(os.Stderr, "testcluster: stop control plane: %v\n", err)
			code = max(code, 1)
		}
	}
	if err != nil {
		code = max(code, 1)
	}
	return code
}

func start(ctx context.Context, opts controlplane.Options, nodes int) (*controlplane.ControlPlane, error) {
	cp, err := controlplane.Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	if nodes > 0 {
		if _, err := cp.AddNodes(ctx, nodes, controlplane.NodeOptions{}); err != nil {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			return nil, errors.Join(fmt.Errorf("add %d nodes: %w", nodes, err), cp.Stop(stopCtx))
		}
	}
	return cp, nil
}

// ControlPlane returns the shared control plane. It fails tb (never skips) if
// Run was not called or the cluster did not start.
func ControlPlane(tb testing.TB) *controlplane.ControlPlane {
	tb.Helper()
	shared.mu.Lock()
	cp, err := shared.cp, shared.err
	shared.mu.Unlock()
	switch {
	case err != nil:
		tb.Fatalf("testcluster: %v", err)
	case cp == nil:
		tb.Fatal(errNotStarted)
	}
	return cp
}

// RESTConfig returns a copy of the shared cluster's cluster-admin config.
func RESTConfig(tb testing.TB) *rest.Config {
	tb.Helper()
	return ControlPlane(tb).RESTConfig()
}

// Client returns a typed client for the shared cluster.
func Client(tb testing.TB) kubernetes.Interface {
	tb.Helper()
	return NewClient(tb, RESTConfig(tb))
}

// NewClient builds a typed client from cfg, failing tb on error.
func NewClient(tb testing.TB, cfg *rest.Config) kubernetes.Interface {
	tb.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatalf("testcluster: build client: %v", err)
	}
	return c
}

// Namespace creates a namespace named after the test (plus a random suffix) in
// the shared cluster and deletes it when the test ends. Deletion does not wait
// for the namespace to be gone: the namespace controller finishes it while the
// next tests run.
func Namespace(tb testing.TB) string {
	tb.Helper()
	return NamespaceIn(tb, Client(tb))
}

// NamespaceIn is Namespace for any cluster, e.g. one from Start.
func NamespaceIn(tb testing.TB, client kubernetes.Interface) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: namespacePrefix(tb.Name()),
			Labels:       map[string]string{"kubeplug.dev/test": "true"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("testcluster: create namespace for %s: %v", tb.Name(), err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		if err != nil {
			tb.Errorf("testcluster: delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

var notDNSLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// namespacePrefix turns a test name into a DNS label prefix that leaves room
// for the server's 5-character random suffix.
func namespacePrefix(testName string) string {
	s := notDNSLabel.ReplaceAllString(strings.ToLower(testName), "-")
	s = strings.Trim(s, "-")
	if len(s) > 50 {
		s = strings.TrimRight(s[:50], "-")
	}
	if s == "" {
		s = "test"
	}
	return s + "-"
}

// Start starts a control plane for this test alone, with nodes simulated
// nodes, and stops it when the test ends. Use it for tests that restart or
// break components. A nil opts.Logger logs through tb.
func Start(tb testing.TB, opts controlplane.Options, nodes int) *controlplane.ControlPlane {
	tb.Helper()
	if opts.Logger == nil {
		opts.Logger = Logger(tb)
	}
	ctx, cancel := context.WithTimeout(context.Background(), controlplane.DefaultStartTimeout)
	defer cancel()
	cp, err := start(ctx, opts, nodes)
	if err != nil {
		tb.Fatalf("testcluster: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cp.Stop(ctx); err != nil {
			tb.Errorf("testcluster: stop control plane: %v", err)
		}
	})
	return cp
}

// Logger returns a slog.Logger that writes through tb.Log, so messages appear
// with the test that caused them.
func Logger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
