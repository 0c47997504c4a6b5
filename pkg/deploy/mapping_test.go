package deploy_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestMappingsAreCachedAndMissingKindsCostOneDiscovery: a kind is mapped from
// discovery once however often it is asked for; a kind the server does not
// serve (its CRD comes later in the wave) costs one new discovery for every
// caller that asks meanwhile, not one each; ResetMappings finds a kind served
// since.
func TestMappingsAreCachedAndMissingKindsCostOneDiscovery(t *testing.T) {
	var discoveries atomic.Int64 // a full discovery starts with GET /api
	cfg := testcluster.RESTConfig(t)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && r.URL.Path == "/api" {
				discoveries.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	c, err := kube.New(cfg, kube.Options{Logger: testcluster.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	many := func(gvk schema.GroupVersionKind) (errs []error) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 4 {
			for range 50 {
				wg.Go(func() {
					if _, err := c.Mapping(gvk); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
		}
		return errs
	}
	if errs := many(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	if n := discoveries.Load(); n != 1 {
		t.Errorf("200 mappings of a served kind made %d discoveries, want 1", n)
	}

	group := fmt.Sprintf("map%d.kubeplug.dev", time.Now().UnixNano()%1_000_000)
	widget := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"}
	errs := many(widget)
	if len(errs) != 200 || !errors.Is(errs[0], kube.ErrNoKind) {
		t.Fatalf("mappings of a kind not served: %d errors (%v), want 200 ErrNoKind", len(errs), errs[0])
	}
	if n := discoveries.Load(); n != 2 {
		t.Errorf("200 mappings of a kind not served made %d discoveries beyond the first, want 1", n-1)
	}

	crd := &unstructured.Unstructured{}
	crd.SetUnstructuredContent(map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets." + group},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	})
	crds := dyn(t).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(t.Context(), crd.GetName(), metav1.DeleteOptions{}) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.ResetMappings()
		m, err := c.Mapping(widget)
		if err == nil {
			if m.Resource.Resource != "widgets" || !strings.EqualFold(string(m.Scope.Name()), "namespace") {
				t.Errorf("mapping = %+v", m)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new kind is not found after ResetMappings: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
