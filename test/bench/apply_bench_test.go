package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/internal/controlplane"
	"github.com/kubeplug/kubeplug/internal/testcluster"
	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
)

func TestMain(m *testing.M) {
	os.Exit(testcluster.RunWith(m, testcluster.Config{Nodes: -1}))
}

const (
	plugins       = 20
	objsPerPlugin = 50
)

// content returns plugin i's objects: ConfigMaps in namespace ns.
func content(ns string, i int) []map[string]any {
	var out []map[string]any
	for j := range objsPerPlugin {
		out = append(out, map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("p%02d-cm%02d", i, j), "namespace": ns},
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

// kubeplugCluster writes 20 plugins whose objects go to ns, each requiring the one
// before it in a tree (plugin i requires plugin (i-1)/2), and a cluster file
// naming the Kubernetes version the shared control plane runs.
func kubeplugCluster(tb testing.TB, dir, ns string) string {
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
		write(tb, filepath.Join(dir, "plugins", fmt.Sprintf("p%02d", i), "objects.yaml"), yamlDocs(tb, content(ns, i)))
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

// BenchmarkApply1000 applies the same 1,000 ConfigMaps from 20 plugins with every
// tool, each into its own namespace, and reports the ratios DESIGN.md sets targets for.
func BenchmarkApply1000(b *testing.B) {
	cp := testcluster.ControlPlane(b)
	kubeconfig := cp.KubeconfigPath()
	kubectl := filepath.Join(cp.BinDir(), "kubectl")
	helm := os.Getenv("KUBEPLUG_HELM")
	cfg := testcluster.RESTConfig(b)
	cfg.QPS, cfg.Burst = 500, 1000
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for n := range b.N {
		dir := b.TempDir()
		suffix := fmt.Sprintf("%d-%d", n, time.Now().UnixNano()%100000)

		// kubeplug apply: resolve, render, apply in waves, wait, record inventories.
		path := kubeplugCluster(b, filepath.Join(dir, "kubeplug"), "kp-"+suffix)
		apply := action.NewApply(&action.Config{NoBuiltin: true})
		requests := &countingTransport{}
		kcfg := rest.CopyConfig(cfg)
		kcfg.WrapTransport = requests.wrap
		apply.Target.RESTConfig = kcfg
		applyOnce := func() error {
			cl, l := config.Load(path)
			if cl == nil {
				return l.Err()
			}
			_, l = apply.Run(context.Background(), cl)
			return l.Err()
		}
		var tKubeplug, tReapply, tBare time.Duration
		var fresh, noop int
		kubeplugRuns := func() {
			tKubeplug = timeIt(b, "kubeplug apply", applyOnce)
			fresh = requests.take()
			tReapply = timeIt(b, "kubeplug re-apply (no change)", applyOnce)
			noop = requests.take()
			// Every object is one apply; the rest is kubeplug's own bookkeeping.
			b.Logf("API requests: fresh apply %d (%d fixed beyond one per object), no-op re-apply %d", fresh, fresh-plugins*objsPerPlugin, noop)
			b.ReportMetric(float64(fresh-plugins*objsPerPlugin), "fixed-requests")
			b.ReportMetric(float64(noop), "noop-requests")
		}
		bareRuns := func() {
			// A bare parallel server-side-apply loop: the physical limit here.
			nsBare := "bare-" + suffix
			createNamespace(b, dc, nsBare)
			var all []map[string]any
			for i := range plugins {
				all = append(all, content(nsBare, i)...)
			}
			tBare = timeIt(b, "bare parallel SSA loop", func() error {
				sem := make(chan struct{}, 32)
				var wg sync.WaitGroup
				var mu sync.Mutex
				var first error
				for _, o := range all {
					sem <- struct{}{}
					wg.Go(func() {
						defer func() { <-sem }()
						u := &unstructured.Unstructured{Object: o}
						_, err := dc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(nsBare).
							Apply(context.Background(), u.GetName(), u, metav1.ApplyOptions{FieldManager: "bench"})
						if err != nil {
							mu.Lock()
							first = err
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				return first
			})
		}
		// Alternate which goes first: the API server warms up (caches, etcd) on
		// whatever runs first.
		if n%2 == 0 {
			kubeplugRuns()
			bareRuns()
		} else {
			bareRuns()
			kubeplugRuns()
		}

		// kubectl apply --server-side of the same objects, in one directory.
		nsKubectl := "kubectl-" + suffix
		createNamespace(b, dc, nsKubectl)
		kdir := filepath.Join(dir, "kubectl")
		for i := range plugins {
			write(b, filepath.Join(kdir, fmt.Sprintf("p%02d.yaml", i)), yamlDocs(b, content(nsKubectl, i)))
		}
		tKubectl := timeIt(b, "kubectl apply --server-side", func() error {
			return run(kubectl, "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", kdir)
		})

		// helm install of the same content as 20 charts, one release after another.
		var tHelm time.Duration
		if helm != "" {
			nsHelm := "helm-" + suffix
			createNamespace(b, dc, nsHelm)
			tHelm = timeIt(b, "helm install x20", func() error {
				for i := range plugins {
					chart := filepath.Join(dir, "helm", fmt.Sprintf("p%02d", i))
					write(b, filepath.Join(chart, "Chart.yaml"), fmt.Sprintf("apiVersion: v2\nname: p%02d\nversion: 1.0.0\n", i))
					write(b, filepath.Join(chart, "templates", "objects.yaml"), yamlDocs(b, content(nsHelm, i)))
					if err := run(helm, "--kubeconfig", kubeconfig, "install", fmt.Sprintf("p%02d", i), chart, "--namespace", nsHelm); err != nil {
						return err
					}
				}
				return nil
			})
		} else {
			b.Log("helm comparison skipped: set KUBEPLUG_HELM (make bench builds it)")
		}

		// Not timed: every iteration's apply is a fresh install, not an upgrade
		// moving the previous iteration's plugins (and pruning their objects).
		un := action.NewUninstall(&action.Config{NoBuiltin: true})
		un.Target.RESTConfig = cfg
		names := []string{"ns"}
		for i := range plugins {
			names = append(names, fmt.Sprintf("p%02d", i))
		}
		un.Cascade = true
		if _, l := un.Run(context.Background(), names...); l.HasFatal() {
			b.Fatalf("uninstall the bench's plugins: %v", l)
		}

		b.ReportMetric(tKubectl.Seconds()/tKubeplug.Seconds(), "x-faster-than-kubectl")
		if tHelm > 0 {
			b.ReportMetric(tHelm.Seconds()/tKubeplug.Seconds(), "x-faster-than-helm")
		}
		b.ReportMetric(tKubeplug.Seconds()/tBare.Seconds(), "x-of-bare-loop")
		b.ReportMetric(tReapply.Seconds(), "reapply-s")
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
	path := kubeplugCluster(b, filepath.Join(b.TempDir(), "kubeplug"), fmt.Sprintf("noop-%d", time.Now().UnixNano()%100000))
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
	for b.Loop() {
		applyOnce()
	}
	b.ReportMetric(float64(requests.take())/float64(b.N), "requests/op")
}
