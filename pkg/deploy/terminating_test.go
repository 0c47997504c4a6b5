package deploy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeplug/kubeplug/pkg/deploy"
)

// TestNamespaceBeingDeletedIsMadeAnew: a plugin whose namespace is still being
// deleted (uninstalled a moment before, or a cluster stopped while it
// terminated) waits until it is gone and makes it anew, instead of failing with
// "unable to create new content in namespace … because it is being terminated".
func TestNamespaceBeingDeletedIsMadeAnew(t *testing.T) {
	ns := fmt.Sprintf("term-%d", time.Now().UnixNano()%1_000_000)
	nsGVR := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	plugin := unique(t, "again")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })

	// The namespace held in Terminating by a finalizer of the test's.
	held := objs(t, ns, `
apiVersion: v1
kind: Namespace
metadata: {name: NS, finalizers: [kubeplug.dev/test-hold]}
`)[0]
	if _, err := dyn(t).Resource(nsGVR).Create(t.Context(), held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dyn(t).Resource(nsGVR).Delete(t.Context(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	release := time.AfterFunc(2*time.Second, func() {
		_, _ = dyn(t).Resource(nsGVR).Patch(context.Background(), ns, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	defer release.Stop()

	content := objs(t, ns, `
apiVersion: v1
kind: Namespace
metadata: {name: NS}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: NS}
data: {k: v}
`)
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: content}}); err != nil {
		t.Fatalf("apply into a namespace being deleted: %v", err)
	}
	got, err := dyn(t).Resource(nsGVR).Get(t.Context(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetDeletionTimestamp() != nil {
		t.Errorf("namespace %s still being deleted after the apply", ns)
	}
	if !exists(t, cmGVR, ns, "settings") {
		t.Errorf("ConfigMap settings not in the namespace made anew")
	}
}
