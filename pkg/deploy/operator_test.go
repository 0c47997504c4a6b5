package deploy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// operatorPlugin is a plugin that installs an operator (its CRD and
// Deployment) and one custom resource the operator finalizes.
func operatorPlugin(t *testing.T, ns, group string) []*deploy.Unit {
	content := objs(t, ns, strings.ReplaceAll(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: backups.GROUP}
spec:
  group: GROUP
  scope: Namespaced
  names: {plural: backups, singular: backup, kind: Backup}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: operator, namespace: NS}
spec:
  replicas: 1
  selector: {matchLabels: {app: operator}}
  template:
    metadata: {labels: {app: operator}}
    spec:
      containers: [{name: operator, image: registry.example/operator:1}]
---
apiVersion: GROUP/v1
kind: Backup
metadata: {name: nightly, namespace: NS}
spec: {schedule: "@daily"}
`, "GROUP", group))
	return []*deploy.Unit{{Version: "1.0.0", Objects: content}}
}

// TestUninstallFinishesCustomResourcesBeforeTheOperator: the operator's
// finalizer runs while the operator still exists, and nothing is left
// Terminating; with the operator gone, uninstall stops, names the custom
// resource and its finalizer, keeps the operator, and a re-run converges.
func TestUninstallFinishesCustomResourcesBeforeTheOperator(t *testing.T) {
	for _, operatorRuns := range []bool{true, false} {
		t.Run(fmt.Sprintf("operator-runs=%v", operatorRuns), func(t *testing.T) {
			ns := testcluster.Namespace(t)
			group := strings.ReplaceAll(ns, "-", "") + ".example.com"
			plugin := unique(t, "operator")
			d := newDeployer(t, deploy.Options{Timeout: 5 * time.Second})
			u := operatorPlugin(t, ns, group)[0]
			u.Plugin = plugin
			t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
			if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{*u}); err != nil {
				t.Fatal(err)
			}
			backups := dyn(t).Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "backups"}).Namespace(ns)
			const fin = "example.com/cleanup"
			if _, err := backups.Patch(t.Context(), "nightly", types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+fin+`"]}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			// The operator: when the backup is being deleted, it cleans up — which
			// needs the operator's own Deployment still there — and lets go.
			operatorSaw := make(chan bool, 1)
			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			if operatorRuns {
				go func() {
					for ctx.Err() == nil {
						b, err := backups.Get(ctx, "nightly", metav1.GetOptions{})
						if err == nil && b.GetDeletionTimestamp() != nil {
							_, err := dyn(t).Resource(depGVR).Namespace(ns).Get(ctx, "operator", metav1.GetOptions{})
							operatorSaw <- err == nil
							_, _ = backups.Patch(ctx, "nightly", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
				}()
			}
			_, err := d.Uninstall(t.Context(), []string{plugin}, true)
			if !operatorRuns {
				if err == nil || !strings.Contains(err.Error(), "Backup") || !strings.Contains(err.Error(), fin) {
					t.Fatalf("uninstall with a custom resource nobody finalizes: err = %v, want one naming it and its finalizer", err)
				}
				if !exists(t, depGVR, ns, "operator") {
					t.Fatal("the operator was removed while its custom resource was still terminating")
				}
				// Its operator back (here: the finalizer cleared), a re-run converges.
				_, _ = backups.Patch(t.Context(), "nightly", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				if _, err := d.Uninstall(t.Context(), []string{plugin}, true); err != nil {
					t.Fatalf("re-run of uninstall: %v", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if !<-operatorSaw {
					t.Error("the operator's Deployment was gone when its finalizer ran")
				}
			}
			if exists(t, depGVR, ns, "operator") {
				t.Error("operator left after uninstall")
			}
			crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
			deadline := time.Now().Add(30 * time.Second)
			for exists(t, crds, "", "backups."+group) {
				if time.Now().After(deadline) {
					t.Fatal("the CRD is still there (Terminating?) 30s after uninstall")
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}
