package cmd

import (
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/deploy"
)

// TestPrintDrift: one block per drifted plugin, values as JSON, an absent field,
// Secrets' and sensitive values never printed, the summary on the status stream
// and nothing on out when nothing drifted.
func TestPrintDrift(t *testing.T) {
	drift := []deploy.PluginDrift{
		{Plugin: "calm", Checked: 2},
		{Plugin: "web", Checked: 4, Objects: []deploy.ObjectDrift{
			{Object: deploy.ObjRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web", Name: "web"}, Fields: []deploy.FieldDrift{
				{Path: "/spec/replicas", Live: int64(5), Desired: int64(2), ChangedBy: []string{"kubectl-scale"}},
				{Path: "/metadata/labels/team", Live: "ops"},
			}},
			{Object: deploy.ObjRef{Version: "v1", Kind: "Secret", Namespace: "web", Name: "creds"}, Fields: []deploy.FieldDrift{{Path: "/data/password", Redacted: true}}},
			{Object: deploy.ObjRef{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "env"}, Fields: []deploy.FieldDrift{{Path: "/data/token", Redacted: true}}},
			{Object: deploy.ObjRef{Version: "v1", Kind: "Service", Namespace: "web", Name: "web"}, Missing: true},
		}},
	}
	var out, status strings.Builder
	if err := printDrift(&out, &status, drift); err != nil {
		t.Fatal(err)
	}
	want := `plugin web: 4 of 4 object(s) drifted
  Deployment.apps/web/web:
    /spec/replicas: live 5, desired 2 (changed by kubectl-scale)
    /metadata/labels/team: live "ops", desired (absent)
  Secret/web/creds:
    /data/password: (secret data changed)
  ConfigMap/web/env:
    /data/token: (sensitive value changed)
  Service/web/web: missing
`
	if out.String() != want {
		t.Errorf("out:\n%s\nwant:\n%s", out.String(), want)
	}
	if status.String() != "4 of 6 object(s) of 2 plugin(s) drifted\n" {
		t.Errorf("status = %q", status.String())
	}
	out.Reset()
	if err := printDrift(&out, &status, drift[:1]); err != nil || out.Len() != 0 {
		t.Errorf("no drift printed %q (%v)", out.String(), err)
	}
}
