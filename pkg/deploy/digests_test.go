package deploy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestDigestsAreRecordedNotSentAndOldObjectsMigrate: what kubeplug applies is
// the plugin's content and its plugin label, nothing more — the digest of each
// object's content is in the release record. Objects an earlier kubeplug
// applied with its digest annotation and managed-by label, under a record
// without digests, are applied once more, which removes both (server-side apply
// drops what kubeplug's field manager no longer sends); the apply after that is
// a no-op again.
func TestDigestsAreRecordedNotSentAndOldObjectsMigrate(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "digests")
	unit := func() deploy.Unit {
		return deploy.Unit{Plugin: plugin, Version: "1.0.0", Objects: objs(t, ns,
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain, namespace: NS}\ndata: {v: \"1\"}\n---\n"+
				"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: annotated, namespace: NS, annotations: {team: a}}\ndata: {v: \"2\"}\n")}
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
		if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{unit()}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = newDeployer(t, deploy.Options{}).Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true)
	})
	cms := testcluster.Client(t).CoreV1().ConfigMaps(ns)
	sent := func(when string) {
		t.Helper()
		for _, name := range []string{"plain", "annotated"} {
			cm, err := cms.Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := cm.Annotations[deploy.AnnotationDigest]; ok {
				t.Errorf("%s: %s carries the digest annotation: %v", when, name, cm.Annotations)
			}
			if _, ok := cm.Labels[deploy.LabelManagedBy]; ok || cm.Labels[deploy.LabelPlugin] != plugin || len(cm.Labels) != 1 {
				t.Errorf("%s: %s has labels %v, want only %s=%s", when, name, cm.Labels, deploy.LabelPlugin, plugin)
			}
		}
		if cm, _ := cms.Get(t.Context(), "annotated", metav1.GetOptions{}); cm != nil && cm.Annotations["team"] != "a" {
			t.Errorf("%s: the plugin's own annotation was lost: %v", when, cm.Annotations)
		}
		rec := inventory(t, newDeployer(t, deploy.Options{}), plugin)
		if rec == nil || len(rec.Digests) != 2 || rec.Digests["/ConfigMap/"+ns+"/plain"] == "" {
			t.Errorf("%s: recorded digests %+v, want one per object", when, rec)
		}
	}
	apply()
	sent("fresh apply")

	// As an earlier kubeplug left them: its annotation and label on each object,
	// applied by kubeplug's field manager, and a record without digests.
	for _, o := range unit().Objects {
		o.SetLabels(map[string]string{deploy.LabelPlugin: plugin, deploy.LabelManagedBy: deploy.FieldManager})
		ann := o.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[deploy.AnnotationDigest] = "0123456789abcdef0123456789abcdef"
		o.SetAnnotations(ann)
		if _, err := dyn(t).Resource(cmGVR).Namespace(ns).Apply(t.Context(), o.GetName(), o, metav1.ApplyOptions{FieldManager: deploy.FieldManager}); err != nil {
			t.Fatal(err)
		}
	}
	if err := newDeployer(t, deploy.Options{}).ForgetDigests(t.Context(), plugin); err != nil {
		t.Fatal(err)
	}
	d := newDeployer(t, deploy.Options{})
	if got, err := d.Drift(t.Context(), []deploy.Unit{unit()}); err != nil || len(got) != 1 || len(got[0].Objects) != 0 {
		t.Errorf("drift of objects an earlier kubeplug applied: %+v (%v), want none: its annotation and label are not the plugin's content", got, err)
	}
	apply()
	sent("the apply after an earlier kubeplug's")

	inNS := func(r string) bool { return strings.Contains(r, "/namespaces/"+ns+"/") }
	log.take(func(string) bool { return false })
	apply()
	if objects := log.take(inNS); len(objects) != 1 || !strings.HasPrefix(objects[0], "GET-META ") {
		t.Errorf("requests of the re-apply after the migration: %v, want a no-op (one metadata LIST)", objects)
	}
}

// TestKilledApplyLeavesNoDigestOfWhatItChanged: a revision being applied keeps
// no digest for the objects it changes, so that after a run killed once it
// applied them, going back to the earlier content applies them again (and
// server-side apply drops the field the killed run added) rather than
// trusting a digest of content the objects no longer hold.
func TestKilledApplyLeavesNoDigestOfWhatItChanged(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "killdigest")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	v1 := func() []*unstructured.Unstructured {
		return objs(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: NS}\ndata: {x: \"1\"}\n---\n"+
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: same, namespace: NS}\ndata: {x: \"1\"}\n")
	}
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: v1()}}); err != nil {
		t.Fatal(err)
	}
	// v2 adds a field to cm and a Deployment that never becomes ready: the
	// run is killed (its context cancelled) while it waits, cm applied.
	v2 := objs(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: NS}\ndata: {x: \"1\", z: \"2\"}\n---\n"+
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: same, namespace: NS}\ndata: {x: \"1\"}\n---\n"+stuckDeployment("stuck"))
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	_, err := d.ApplyWave(ctx, 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: v2}})
	cancel()
	if err == nil {
		t.Fatal("the killed apply succeeded")
	}
	if got := cmData(t, ns, "cm"); got["z"] != "2" {
		t.Fatalf("cm after the killed apply: %v, want v2's z applied", got)
	}
	rec := inventory(t, d, plugin)
	if _, ok := rec.Digests["/ConfigMap/"+ns+"/cm"]; ok || rec.Digests["/ConfigMap/"+ns+"/same"] == "" {
		t.Errorf("digests of the killed revision: %v, want none for cm (changed), same's kept", rec.Digests)
	}
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: v1()}}); err != nil {
		t.Fatal(err)
	}
	if got := cmData(t, ns, "cm"); len(got) != 1 || got["x"] != "1" {
		t.Errorf("cm after going back to v1: %v, want v1's data only", got)
	}
}

func cmData(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	cm, err := testcluster.Client(t).CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data
}
