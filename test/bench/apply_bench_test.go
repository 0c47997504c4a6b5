package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

func TestMain(m *testing.M) {
	os.Exit(testcluster.RunWith(m, testcluster.Config{Nodes: -1}))
}

// plugins is how many plugins the benchmarks' objects are spread over.
const plugins = 20

// perPlugin is how many of objects plugin i has: objects spread evenly over
// the plugins, the first ones taking what does not divide.
func perPlugin(objects, i int) int {
	n := objects / plugins
	if i < objects%plugins {
		n++
	}
	return n
}

// content returns plugin i's objects, its share of objects in all: ConfigMaps
// in namespace ns.
func content(ns string, i, objects int) []map[string]any {
	var out []map[string]any
	for j := range perPlugin(objects, i) {
		out = append(out, map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("p%02d-cm%03d", i, j), "namespace": ns},
			"data":     map[string]any{"plugin": fmt.Sprint(i), "index": fmt.Sprint(j), "payload": strings.Repeat("x", 256)},
		})
	}
	return out
}

func yamlDocs(tb testing.TB, objs []map[string]any) string {
	var b strings.Builder
	for _, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			tb.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.String()
}

func write(tb testing.TB, path, text string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// kubeplugCluster writes 20 plugins with objects ConfigMaps in all, in ns, each
// requiring the one before it in a tree (plugin i requires plugin (i-1)/2: six
// waves), and a cluster file naming the Kubernetes version the shared control
// plane runs.
func kubeplugCluster(tb testing.TB, dir, ns string, objects int) string {
	version, err := controlplane.KubernetesVersion(testcluster.ControlPlane(tb).BinDir())
	if err != nil {
		tb.Fatal(err)
	}
	var enabled strings.Builder
	write(tb, filepath.Join(dir, "plugins", "ns", "plugin.yaml"), "apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: ns, version: 1.0.0}\nspec: {contributes: {kubernetes: {manifests: [ns.yaml]}}}\n")
	write(tb, filepath.Join(dir, "plugins", "ns", "ns.yaml"), "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n")
	for i := range plugins {
		req := "[{name: ns}]"
		if i > 0 {
			req = fmt.Sprintf("[{name: ns}, {name: p%02d}]", (i-1)/2)
		}
		write(tb, filepath.Join(dir, "plugins", fmt.Sprintf("p%02d", i), "plugin.yaml"), fmt.Sprintf(
			"apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: p%02d, version: 1.0.0}\nspec:\n  requires: %s\n  contributes: {kubernetes: {manifests: [objects.yaml]}}\n", i, req))
		write(tb, filepath.Join(dir, "plugins", fmt.Sprintf("p%02d", i), "objects.yaml"), yamlDocs(tb, content(ns, i, objects)))
		fmt.Fprintf(&enabled, "      - {name: p%02d}\n", i)
	}
	path := filepath.Join(dir, "cluster.yaml")
	write(tb, path, "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: bench}\nspec:\n  kubernetesVersion: "+version+"\n  plugins:\n    sources: [{dir: plugins}]\n    enabled:\n"+enabled.String())
	return path
}

func timeIt(tb testing.TB, what string, f func() error) time.Duration {
	tb.Helper()
	start := time.Now()
	if err := f(); err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
	d := time.Since(start)
	tb.Logf("%-28s %8.2fs", what, d.Seconds())
	return d
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func createNamespace(tb testing.TB, d dynamic.Interface, ns string) {
	tb.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	if _, err := d.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
}

// countingTransport counts the API requests the clients it wraps send.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		c.n.Add(1)
		return rt.RoundTrip(r)
	})
}

// take returns the requests counted since the last take.
func (c *countingTransport) take() int { return int(c.n.Swap(0)) }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// BenchmarkNoopApply1000 is a re-apply of the 20-plugin, 1,000-object cluster
// with nothing changed: what every controller resync and CI run pays. Target:
// at most 0.1 s on a quiet machine.
//
//	go test ./test/bench -run '^$' -bench NoopApply -benchtime 10x -cpuprofile cpu.out
func BenchmarkNoopApply1000(b *testing.B) {
	cfg := testcluster.RESTConfig(b)
	cfg.QPS, cfg.Burst = 500, 1000
	path := kubeplugCluster(b, filepath.Join(b.TempDir(), "kubeplug"), fmt.Sprintf("noop-%d", time.Now().UnixNano()%100000), 1000)
	apply := action.NewApply(&action.Config{NoBuiltin: true})
	requests := &countingTransport{}
	cfg.WrapTransport = requests.wrap
	apply.Target.RESTConfig = cfg
	applyOnce := func() {
		cl, l := config.Load(path)
		if cl == nil {
			b.Fatal(l)
		}
		if _, l = apply.Run(context.Background(), cl); l.HasFatal() {
			b.Fatal(l)
		}
	}
	applyOnce()
	b.Cleanup(func() {
		un := action.NewUninstall(&action.Config{NoBuiltin: true})
		un.Target.RESTConfig = cfg
		un.All = true
		_, _ = un.Run(context.Background())
	})
	requests.take()
	cpu := processCPU()
	for b.Loop() {
		applyOnce()
	}
	b.ReportMetric(float64(requests.take())/float64(b.N), "requests/op")
	b.ReportMetric(cpuPerObject(processCPU()-cpu, 1000*b.N), "kubeplug-cpu-µs/obj")
}
