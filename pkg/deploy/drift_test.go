package deploy_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestDriftIsReportedThenCorrected applies a plugin, edits its objects by hand (as
// another field manager), and checks that Drift reports each change with its path
// (a Secret's values hidden, an ignored path left out, a deleted object missing),
// that an apply corrects it, and that Drift then reports nothing. A later hand edit
// of only the ignored path is not fought by a re-apply.
func TestDriftIsReportedThenCorrected(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "drift")
	level := "info"
	unit := func() deploy.Unit {
		return deploy.Unit{Plugin: plugin, Version: "1.0.0", Objects: objs(t, ns, `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: NS}
data: {level: `+level+`, replicas: "2"}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: NS}
data: {password: b2xkLXNlY3JldA==}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: doomed, namespace: NS}
data: {a: b}
`), DriftIgnore: []deploy.DriftIgnore{{Kind: "ConfigMap", Name: "settings", Paths: []string{"/data/replicas"}}}}
	}
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{unit()}); err != nil {
		t.Fatal(err)
	}
	drift := func() deploy.PluginDrift {
		t.Helper()
		got, err := d.Drift(t.Context(), []deploy.Unit{unit()})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Plugin != plugin || got[0].Checked != 3 {
			t.Fatalf("drift = %+v", got)
		}
		return got[0]
	}
	if pd := drift(); len(pd.Objects) != 0 {
		t.Fatalf("drift right after apply: %+v", pd.Objects)
	}

	// Edit by hand, as kubectl edit would: an update by another field manager.
	core := testcluster.Client(t).CoreV1()
	edit := metav1.UpdateOptions{FieldManager: "hand-edit"}
	cm, err := core.ConfigMaps(ns).Get(t.Context(), "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["level"], cm.Data["replicas"] = "debug", "5"
	if _, err := core.ConfigMaps(ns).Update(t.Context(), cm, edit); err != nil {
		t.Fatal(err)
	}
	sec, err := core.Secrets(ns).Get(t.Context(), "creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data["password"] = []byte("new-secret")
	if _, err := core.Secrets(ns).Update(t.Context(), sec, edit); err != nil {
		t.Fatal(err)
	}
	if err := core.ConfigMaps(ns).Delete(t.Context(), "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	pd := drift()
	if len(pd.Objects) != 3 {
		t.Fatalf("drifted objects = %+v, want 3", pd.Objects)
	}
	byName := map[string]deploy.ObjectDrift{}
	for _, o := range pd.Objects {
		byName[o.Object.Name] = o
	}
	if o := byName["doomed"]; !o.Missing {
		t.Errorf("deleted ConfigMap: %+v, want missing", o)
	}
	want := []deploy.FieldDrift{{Path: "/data/level", Live: "debug", Desired: "info", ChangedBy: []string{"hand-edit"}}}
	if got := byName["settings"].Fields; !slices.EqualFunc(got, want, func(a, b deploy.FieldDrift) bool {
		return a.Path == b.Path && a.Live == b.Live && a.Desired == b.Desired && slices.Equal(a.ChangedBy, b.ChangedBy)
	}) {
		t.Errorf("settings drift = %+v, want %+v (the ignored /data/replicas left out)", got, want)
	}
	sf := byName["creds"].Fields
	if len(sf) != 1 || sf[0].Path != "/data/password" || !sf[0].Redacted || sf[0].Live != nil || sf[0].Desired != nil {
		t.Errorf("secret drift = %+v, want /data/password redacted", sf)
	}
	raw, _ := json.Marshal(pd)
	t.Logf("drift: %s", raw)
	for _, secret := range []string{"b2xkLXNlY3JldA==", "bmV3LXNlY3JldA==", "old-secret", "new-secret"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("drift report reveals the secret's value %q: %s", secret, raw)
		}
	}

	// An apply corrects the drift (taking the edited fields back from hand-edit).
	forced := newDeployer(t, deploy.Options{Timeout: time.Minute, ForceConflicts: true})
	if _, err := forced.ApplyWave(t.Context(), 0, []deploy.Unit{unit()}); err != nil {
		t.Fatal(err)
	}
	if pd := drift(); len(pd.Objects) != 0 {
		t.Fatalf("drift after the correcting apply: %+v", pd.Objects)
	}

	// An autoscaler-like edit of only the ignored field: not drift, and a re-apply
	// (without forcing) skips the object instead of fighting over the field.
	cm, err = core.ConfigMaps(ns).Get(t.Context(), "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["replicas"] = "7"
	if _, err := core.ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "autoscaler"}); err != nil {
		t.Fatal(err)
	}
	if pd := drift(); len(pd.Objects) != 0 {
		t.Errorf("an ignored path reported as drift: %+v", pd.Objects)
	}
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{unit()}); err != nil {
		t.Fatalf("re-apply after an edit of an ignored path: %v", err)
	}
	cm, err = core.ConfigMaps(ns).Get(t.Context(), "settings", metav1.GetOptions{})
	if err != nil || cm.Data["replicas"] != "7" {
		t.Errorf("ignored field after re-apply = %q (%v), want 7 (left to its owner)", cm.Data["replicas"], err)
	}
	// A new version of the content is applied without the ignored field its owner
	// holds: no conflict over it, and it keeps its value.
	level = "warn"
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{unit()}); err != nil {
		t.Fatalf("apply of changed content with an ignored field owned by another manager: %v", err)
	}
	cm, err = core.ConfigMaps(ns).Get(t.Context(), "settings", metav1.GetOptions{})
	if err != nil || cm.Data["replicas"] != "7" || cm.Data["level"] != "warn" {
		t.Errorf("after the content change: %v (%v), want level warn and replicas 7", cm.Data, err)
	}
	if pd := drift(); len(pd.Objects) != 0 {
		t.Errorf("drift after the content change: %+v", pd.Objects)
	}
}
