package deploy_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestStatusFreeAppliesAreAnsweredWithMetadata: an apply of a kind without a
// status (a ConfigMap, a Role) asks the server for the stored object's
// metadata only; a kind with a status (a Service) and a kind the unit's health
// checks read (a ConfigMap, in another unit) are answered whole. The records
// hold the resourceVersions the metadata answers gave — the live ones, so
// that the next apply is a no-op — and the objects are stored whole.
func TestStatusFreeAppliesAreAnsweredWithMetadata(t *testing.T) {
	ns := testcluster.Namespace(t)
	plain, checked := unique(t, "answer"), unique(t, "answer-checked")
	units := func() []deploy.Unit {
		return []deploy.Unit{
			{Plugin: plain, Version: "1.0.0", Objects: objs(t, ns, `apiVersion: v1
kind: ConfigMap
metadata: {name: plain, namespace: NS}
data: {v: "1"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: NS}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: NS}
spec: {ports: [{port: 80}]}
`)},
			{Plugin: checked, Version: "1.0.0", Health: readyCheck, Objects: objs(t, ns, `apiVersion: v1
kind: ConfigMap
metadata: {name: checked, namespace: NS}
data: {ready: "true"}
`)},
		}
	}
	log := &requestLog{}
	cfg := testcluster.RESTConfig(t)
	cfg.WrapTransport = log.wrap
	apply := func() {
		t.Helper()
		d, err := deploy.New(cfg, deploy.Options{Logger: testcluster.Logger(t), Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.ApplyWave(t.Context(), 0, units()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = newDeployer(t, deploy.Options{}).Uninstall(t.Context(), []string{plain, checked}, true) })
	apply()
	inNS := func(r string) bool { return strings.Contains(r, "/namespaces/"+ns+"/") }
	patches := slices.DeleteFunc(log.take(inNS), func(r string) bool { return !strings.HasPrefix(r, "PATCH") })
	slices.Sort(patches)
	want := []string{
		"PATCH /api/v1/namespaces/" + ns + "/configmaps/checked",
		"PATCH /api/v1/namespaces/" + ns + "/services/web",
		"PATCH-META /api/v1/namespaces/" + ns + "/configmaps/plain",
		"PATCH-META /apis/rbac.authorization.k8s.io/v1/namespaces/" + ns + "/roles/reader",
	}
	if !slices.Equal(patches, want) {
		t.Errorf("applies: %v, want %v", patches, want)
	}

	cm, err := testcluster.Client(t).CoreV1().ConfigMaps(ns).Get(t.Context(), "plain", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["v"] != "1" {
		t.Errorf("the ConfigMap applied with a metadata answer holds %v, want its data", cm.Data)
	}
	rec := inventory(t, newDeployer(t, deploy.Options{}), plain)
	if rec == nil {
		t.Fatal("no record")
	}
	if got := rec.ResourceVersions["/ConfigMap/"+ns+"/plain"]; got != cm.ResourceVersion {
		t.Errorf("recorded resourceVersion of the ConfigMap: %q (all: %v), want the live %q", got, rec.ResourceVersions, cm.ResourceVersion)
	}

	// Nothing changed: nothing is applied again.
	apply()
	if again := slices.DeleteFunc(log.take(inNS), func(r string) bool { return !strings.HasPrefix(r, "PATCH") }); len(again) > 0 {
		t.Errorf("a re-apply with nothing changed applied %v", again)
	}
}
