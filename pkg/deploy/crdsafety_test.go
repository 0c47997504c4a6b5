package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// TestUnsafeCRDUpgradeIsRefusedUntilForced installs a plugin with a CRD, then
// upgrades it to a version whose CRD drops a field: the apply is refused with the
// finding, and nothing of the plugin changes (neither the CRD nor its ConfigMap);
// with ForceCRDChanges the upgrade is applied.
func TestUnsafeCRDUpgradeIsRefusedUntilForced(t *testing.T) {
	ns := testcluster.Namespace(t)
	group := fmt.Sprintf("s%d.kubeplug.dev", time.Now().UnixNano()%1_000_000_000)
	plugin := unique(t, "crdsafety")
	content := func(version string, withMode bool) []*unstructured.Unstructured {
		mode := ""
		if withMode {
			mode = ", mode: {type: string, enum: [fast, slow]}"
		}
		text := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.GROUP}
spec:
  group: GROUP
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, properties: {size: {type: integer}MODE}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: NS}
data: {version: "VERSION"}
`
		text = strings.NewReplacer("GROUP", group, "MODE", mode, "VERSION", version).Replace(text)
		return objs(t, ns, text)
	}
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: content("1.0.0", true)}}); err != nil {
		t.Fatal(err)
	}

	crdFields := func() map[string]any {
		t.Helper()
		crd, err := dyn(t).Resource(crdGVR).Get(t.Context(), "widgets."+group, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vs, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		p, _, _ := unstructured.NestedMap(vs[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties")
		return p
	}
	settings := func() string {
		t.Helper()
		cm, err := testcluster.Client(t).CoreV1().ConfigMaps(ns).Get(t.Context(), "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data["version"]
	}

	_, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "2.0.0", Objects: content("2.0.0", false)}})
	if !errors.Is(err, deploy.ErrUnsafeCRDChange) {
		t.Fatalf("upgrade that removes a field: %v, want ErrUnsafeCRDChange", err)
	}
	want := "plugin " + plugin + ": CustomResourceDefinition widgets." + group + ": version v1: field .spec.mode: removed"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error = %q\nwant it to contain %q", err, want)
	}
	if _, ok := crdFields()["mode"]; !ok {
		t.Error("the refused upgrade removed .spec.mode from the CRD")
	}
	if got := settings(); got != "1.0.0" {
		t.Errorf("the refused upgrade changed the plugin's ConfigMap to %q", got)
	}

	forced := newDeployer(t, deploy.Options{Timeout: time.Minute, ForceCRDChanges: true})
	if _, err := forced.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "2.0.0", Objects: content("2.0.0", false)}}); err != nil {
		t.Fatalf("forced upgrade: %v", err)
	}
	if _, ok := crdFields()["mode"]; ok {
		t.Error("the forced upgrade left .spec.mode in the CRD")
	}
	if got := settings(); got != "2.0.0" {
		t.Errorf("ConfigMap after the forced upgrade = %q, want 2.0.0", got)
	}
	// A safe change (a new field) needs no force.
	next := content("3.0.0", true)
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "3.0.0", Objects: next}}); err != nil {
		t.Fatalf("adding a field back: %v", err)
	}
	if _, ok := crdFields()["mode"]; !ok {
		t.Error("the CRD was not upgraded with the added field")
	}
}
