package action_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestDriftAndStatusFromAClusterFile applies a cluster file, edits an object by hand
// and checks what Drift (kubeplug diff --live) and Status.Report (kubeplug status
// -f) say: the edited path with both values, a field that holds a sensitive value
// hidden, the path the plugin's spec.drift.ignore names left out; after a forced
// apply, no drift.
func TestDriftAndStatusFromAClusterFile(t *testing.T) {
	const file = "testdata/drift/cluster.yaml"
	cfg := &action.Config{NoBuiltin: true, Env: func(string) (string, bool) { return "", false }}
	rc := testcluster.RESTConfig(t)
	apply := action.NewApply(cfg)
	apply.Target.RESTConfig = rc
	apply.Timeout = time.Minute
	t.Cleanup(func() {
		u := action.NewUninstall(cfg)
		u.Target.RESTConfig = rc
		_, _ = u.Run(context.WithoutCancel(t.Context()), "drifty")
	})
	if _, l := apply.Run(t.Context(), load(t, file)); l.HasFatal() {
		t.Fatal(l)
	}
	drift := func() deploy.PluginDrift {
		t.Helper()
		a := action.NewDrift(cfg)
		a.Target.RESTConfig = rc
		got, l := a.Run(t.Context(), load(t, file))
		if l.HasFatal() {
			t.Fatal(l)
		}
		if len(got) != 1 || got[0].Plugin != "drifty" || got[0].Checked != 2 {
			t.Fatalf("drift = %+v", got)
		}
		return got[0]
	}
	if pd := drift(); len(pd.Objects) != 0 {
		t.Fatalf("drift right after apply: %+v", pd.Objects)
	}

	cms := testcluster.Client(t).CoreV1().ConfigMaps("drifty-test")
	cm, err := cms.Get(t.Context(), "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["greeting"], cm.Data["token-copy"], cm.Data["replicas"] = "changed", "other", "9"
	if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "hand-edit"}); err != nil {
		t.Fatal(err)
	}

	pd := drift()
	if len(pd.Objects) != 1 || pd.Objects[0].Object.Name != "settings" {
		t.Fatalf("drifted objects = %+v, want settings", pd.Objects)
	}
	var paths []string
	for _, f := range pd.Objects[0].Fields {
		paths = append(paths, f.Path)
		switch f.Path {
		case "/data/greeting":
			if f.Live != "changed" || f.Desired != "hi" || f.Redacted {
				t.Errorf("greeting drift = %+v", f)
			}
		case "/data/token-copy":
			if !f.Redacted || f.Live != nil || f.Desired != nil {
				t.Errorf("a field holding a sensitive value is shown: %+v", f)
			}
		}
	}
	if !slices.Equal(paths, []string{"/data/greeting", "/data/token-copy"}) {
		t.Errorf("drifted paths = %v, want greeting and token-copy (replicas is ignored)", paths)
	}
	if raw, _ := json.Marshal(pd); strings.Contains(string(raw), "s3cr3t-t0ken") {
		t.Errorf("drift reveals the sensitive value: %s", raw)
	}

	status := action.NewStatus(cfg)
	status.Target.RESTConfig = rc
	report, l := status.Report(t.Context(), load(t, file))
	if l.HasFatal() {
		t.Fatal(l)
	}
	i := slices.IndexFunc(report, func(r action.PluginReport) bool { return r.Plugin == "drifty" })
	if i < 0 || report[i].Drift == nil || *report[i].Drift != 1 || !slices.Equal(report[i].Drifted, []string{"ConfigMap/drifty-test/settings"}) {
		t.Errorf("status report = %+v, want drifty with 1 drifted object", report)
	}
	report, l = status.Report(t.Context(), nil)
	if l.HasFatal() {
		t.Fatal(l)
	}
	for _, r := range report {
		if r.Drift != nil {
			t.Errorf("drift of %s known without a cluster file: %d", r.Plugin, *r.Drift)
		}
	}

	// The editor owns the fields now: a forced apply takes them back.
	apply.ForceConflicts = true
	if _, l := apply.Run(t.Context(), load(t, file)); l.HasFatal() {
		t.Fatal(l)
	}
	if pd := drift(); len(pd.Objects) != 0 {
		t.Errorf("drift after the correcting apply: %+v", pd.Objects)
	}
}
