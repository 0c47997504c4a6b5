package served

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/sdk/apiserver"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// The benchmarks compare a served API (the example's Widget, through the
// kube-apiserver, the aggregator and the SDK server in this process, stored
// as Secrets) with the same number of ConfigMaps straight from the
// kube-apiserver: the ratio is what counts, the absolute numbers are this
// machine's. Run them alone:
//
//	KUBEPLUG_LOCALCLUSTER_BIN=… go test ./test/e2e/served/ -run '^$' -bench . -benchtime 10x

// benchKind is one side of each comparison: a served widget and a
// ConfigMap, made from a name and a number.
type benchKind struct {
	name   string
	client dynamic.ResourceInterface
	object func(name string, n int) *unstructured.Unstructured
	patch  func(n int) []byte
}

// benchEnv serves the widgets unthrottled and returns the two kinds, the
// widgets in the env's namespace, the ConfigMaps in a namespace of their own.
func benchEnv(b *testing.B) (served, configmaps benchKind) {
	b.Helper()
	e := newEnv(b, "")
	e.unthrottled = true
	stop := e.serve(e.listen(), apiserver.Options{Resources: []apiserver.Resource{widgetResource}})
	b.Cleanup(stop)
	e.waitApplied()
	cfg := rest.CopyConfig(testcluster.RESTConfig(b))
	cfg.QPS = -1 // the client is not what is measured
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	group := e.group
	served = benchKind{
		name:   "served",
		client: dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "widgets"}).Namespace(e.ns),
		object: func(name string, n int) *unstructured.Unstructured {
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": group + "/v1alpha1", "kind": "Widget",
				"metadata": map[string]any{"name": name, "labels": map[string]any{"team": "a"}},
				"spec":     map[string]any{"size": int64(n + 1), "color": "red"},
			}}
		},
		patch: func(n int) []byte { return fmt.Appendf(nil, `{"spec":{"size":%d}}`, n+1) },
	}
	configmaps = benchKind{
		name:   "configmaps",
		client: dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(testcluster.Namespace(b)),
		object: func(name string, n int) *unstructured.Unstructured {
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": name, "labels": map[string]any{"team": "a"}},
				"data":     map[string]any{"size": strconv.Itoa(n + 1), "color": "red"},
			}}
		},
		patch: func(n int) []byte { return fmt.Appendf(nil, `{"data":{"size":"%d"}}`, n+1) },
	}
	return served, configmaps
}

// create makes count objects of k, 16 at a time.
func (k benchKind) create(b *testing.B, count int) {
	b.Helper()
	start := time.Now()
	g, ctx := errgroup.WithContext(b.Context())
	g.SetLimit(16)
	for i := range count {
		g.Go(func() error {
			_, err := k.client.Create(ctx, k.object(fmt.Sprintf("o-%05d", i), i), metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("create %d %s: %v", count, k.name, err)
	}
	b.Logf("created %d %s in %s", count, k.name, time.Since(start).Round(time.Millisecond))
}

// BenchmarkList lists 10,000 objects (by a label all of them have), in one
// response and in pages of 500 (limit and continue), served and as
// ConfigMaps.
func BenchmarkList(b *testing.B) {
	const objects = 10000
	served, configmaps := benchEnv(b)
	for _, k := range []benchKind{served, configmaps} {
		k.create(b, objects)
	}
	for _, k := range []benchKind{served, configmaps} {
		for _, limit := range []int64{0, 500} {
			b.Run(fmt.Sprintf("%s/limit=%d", k.name, limit), func(b *testing.B) {
				for b.Loop() {
					n, pages := 0, 0
					// team=a: all the objects, not the namespace's kube-root-ca.crt
					opts := metav1.ListOptions{Limit: limit, LabelSelector: "team=a"}
					for {
						l, err := k.client.List(b.Context(), opts)
						if err != nil {
							b.Fatal(err)
						}
						n, pages = n+len(l.Items), pages+1
						if opts.Continue = l.GetContinue(); opts.Continue == "" {
							break
						}
					}
					if n != objects {
						b.Fatalf("listed %d %s in %d pages, want %d", n, k.name, pages, objects)
					}
				}
			})
		}
	}
}

// BenchmarkWatchFanout changes one object while 50 watches of its namespace
// are open; an operation is one change, from the patch sent until all 50
// watchers have the event.
func BenchmarkWatchFanout(b *testing.B) {
	const watchers = 50
	served, configmaps := benchEnv(b)
	for _, k := range []benchKind{served, configmaps} {
		b.Run(k.name, func(b *testing.B) {
			k.create(b, 1)
			l, err := k.client.List(b.Context(), metav1.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(b.Context())
			defer cancel()
			var ws []watch.Interface
			for range watchers {
				w, err := k.client.Watch(ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
				if err != nil {
					b.Fatalf("watch %d: %v", len(ws), err)
				}
				defer w.Stop()
				ws = append(ws, w)
			}
			n := 0
			for b.Loop() {
				n++
				o, err := k.client.Patch(b.Context(), "o-00000", types.MergePatchType, k.patch(n), metav1.PatchOptions{})
				if err != nil {
					b.Fatal(err)
				}
				rv := o.GetResourceVersion()
				var wg sync.WaitGroup
				errs := make(chan error, watchers)
				for i, w := range ws {
					wg.Go(func() {
						timeout := time.After(30 * time.Second)
						for {
							select {
							case ev, ok := <-w.ResultChan():
								if !ok {
									errs <- fmt.Errorf("watcher %d: the watch ended", i)
									return
								}
								if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type == watch.Modified && u.GetResourceVersion() == rv {
									return
								}
							case <-timeout:
								errs <- fmt.Errorf("watcher %d: no event for resourceVersion %s in 30s", i, rv)
								return
							}
						}
					})
				}
				wg.Wait()
				close(errs)
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
