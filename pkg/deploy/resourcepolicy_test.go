package deploy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// keptLog collects the ObjectKept events of a deployer.
type keptLog struct {
	mu   sync.Mutex
	kept []string
}

func (k *keptLog) event(e deploy.Event) {
	if e.Type == deploy.ObjectKept {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.kept = append(k.kept, e.Plugin+": "+e.Object+" ("+e.Message+")")
	}
}

func (k *keptLog) take() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.kept
	k.kept = nil
	return out
}

// TestResourcePolicyKeep: objects annotated helm.sh/resource-policy: keep stay in
// the cluster when an upgrade prunes them, a rollback prunes them and the plugin
// is uninstalled, and the deployer says so — for a plugin's own objects and for a
// chart's CRD (cert-manager's habit), whose uninstall must not take every custom
// resource of it along.
func TestResourcePolicyKeep(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "keep")
	group := fmt.Sprintf("k%d.kubeplug.dev", time.Now().UnixNano()%1_000_000)
	crd := "certs." + group
	var log keptLog
	d := newDeployer(t, deploy.Options{Timeout: time.Minute, Events: log.event})
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		_, _ = d.Uninstall(ctx, []string{plugin}, true)
		_ = dyn(t).Resource(crdGVR).Delete(ctx, crd, metav1.DeleteOptions{})
		for _, n := range []string{"kept", "kept-v1"} {
			_ = dyn(t).Resource(cmGVR).Namespace(ns).Delete(ctx, n, metav1.DeleteOptions{})
		}
	})
	chrt, err := loader.LoadFiles([]*archive.BufferedFile{
		{Name: "Chart.yaml", Data: []byte("apiVersion: v2\nname: certs\nversion: 1.0.0\n")},
		{Name: "templates/crd.yaml", Data: []byte(strings.ReplaceAll(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certs.GROUP
  annotations: {helm.sh/resource-policy: keep}
spec:
  group: GROUP
  scope: Namespaced
  names: {plural: certs, singular: cert, kind: Cert}
  versions:
    - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`, "GROUP", group))},
		{Name: "templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: certs-config}\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	release := []deploy.HelmRelease{{Name: "certs", Namespace: ns, Chart: chrt}}
	v1 := objs(t, ns, `apiVersion: v1
kind: ConfigMap
metadata: {name: kept-v1, namespace: NS, annotations: {helm.sh/resource-policy: keep}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: plain-v1, namespace: NS}
`)
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: v1, Releases: release}}); err != nil {
		t.Fatal(err)
	}

	// An upgrade that drops both ConfigMaps prunes the plain one and keeps the other.
	v2 := objs(t, ns, `apiVersion: v1
kind: ConfigMap
metadata: {name: kept, namespace: NS, annotations: {helm.sh/resource-policy: keep}}
`)
	res, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "2.0.0", Objects: v2, Releases: release}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pruned != 1 || exists(t, cmGVR, ns, "plain-v1") || !exists(t, cmGVR, ns, "kept-v1") {
		t.Errorf("upgrade: pruned %d; plain-v1 left %v; kept-v1 left %v", res.Pruned, exists(t, cmGVR, ns, "plain-v1"), exists(t, cmGVR, ns, "kept-v1"))
	}
	if got, want := log.take(), []string{plugin + ": ConfigMap/" + ns + "/kept-v1 (helm.sh/resource-policy: keep)"}; !slices.Equal(got, want) {
		t.Errorf("upgrade: kept events %q, want %q", got, want)
	}

	// A rollback to 1 prunes what 2 added: kept too.
	if _, err := d.Rollback(t.Context(), plugin, 1); err != nil {
		t.Fatal(err)
	}
	if !exists(t, cmGVR, ns, "kept") {
		t.Error("rollback deleted the ConfigMap annotated keep")
	}
	if got := log.take(); len(got) != 1 || !strings.Contains(got[0], "ConfigMap/"+ns+"/kept (") {
		t.Errorf("rollback: kept events %q, want the ConfigMap kept", got)
	}

	// Uninstall: the chart's CRD and the plugin's kept ConfigMap stay, the rest goes.
	if _, err := d.Uninstall(t.Context(), []string{plugin}, false); err != nil {
		t.Fatal(err)
	}
	if !exists(t, crdGVR, "", crd) {
		t.Errorf("uninstall deleted the CRD %s annotated keep", crd)
	}
	if exists(t, cmGVR, ns, "certs-config") {
		t.Error("uninstall left the chart's ConfigMap")
	}
	got := log.take()
	slices.Sort(got)
	want := []string{
		plugin + ": ConfigMap/" + ns + "/kept-v1 (helm.sh/resource-policy: keep)",
		plugin + ": CustomResourceDefinition.apiextensions.k8s.io/" + crd + " (helm.sh/resource-policy: keep)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("uninstall: kept events\n%q, want\n%q", got, want)
	}
}
