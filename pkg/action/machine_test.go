package action_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestUninstallAndRollbackSayWhatStays: a plugin that contributes a node label
// and a control-plane flag besides its objects is recorded with them; rolling
// back to a revision without the label, and uninstalling, warn naming exactly
// the contributions that stay on the machines and how to remove them.
func TestUninstallAndRollbackSayWhatStays(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		writeTree(t, dir, map[string]string{name: text})
	}
	plugin := func(version, label string) {
		write("plugins/"+version+"/plugin.yaml", `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: machiny, version: `+version+`}
spec:
  contributes:
    controlPlane:
      apiServer: {flags: {audit-log-maxage: "7"}}
    nodes:
      - kubelet: {labels: {`+label+`}}
    kubernetes: {manifests: [cm.yaml]}
`)
		write("plugins/"+version+"/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: machiny-test, namespace: default}\ndata: {v: \""+version+"\"}\n")
	}
	plugin("1.0.0", "team: a, tier: web")
	plugin("2.0.0", "team: a")
	file := func(version string) string {
		path := filepath.Join(dir, "cluster-"+version+".yaml")
		write(filepath.Base(path), "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: machiny}\nspec:\n  kubernetesVersion: 1.37.1\n  plugins:\n    sources: [{dir: ./plugins}]\n    enabled: [{name: machiny, version: "+version+"}]\n")
		return path
	}
	cfg := &action.Config{NoBuiltin: true, Env: func(string) (string, bool) { return "", false }}
	rc := testcluster.RESTConfig(t)
	for _, v := range []string{"1.0.0", "2.0.0"} {
		a := action.NewApply(cfg)
		a.Target.RESTConfig = rc
		a.Timeout = time.Minute
		if _, l := a.Run(t.Context(), load(t, file(v))); l.HasFatal() {
			t.Fatal(l)
		}
	}
	t.Cleanup(func() {
		u := action.NewUninstall(cfg)
		u.Target.RESTConfig = rc
		_, _ = u.Run(context.WithoutCancel(t.Context()), "machiny")
	})

	rb := action.NewRollback(cfg)
	rb.Target.RESTConfig = rc
	rb.Timeout = time.Minute
	rb.Revision = 1
	_, l := rb.Run(t.Context(), "machiny")
	if l.HasFatal() {
		t.Fatal(l)
	}
	if got := l.String(); !strings.Contains(got, "warning: plugin machiny: rollback changes only Kubernetes objects") ||
		!strings.Contains(got, "nodes.label") || !strings.Contains(got, "tier (only in the revision restored)") || strings.Contains(got, "audit-log-maxage") {
		t.Errorf("rollback diagnostics:\n%s\nwant a warning naming the tier label only", got)
	}

	u := action.NewUninstall(cfg)
	u.Target.RESTConfig = rc
	res, l := u.Run(t.Context(), "machiny")
	if l.HasFatal() || len(res.Removed) != 1 || res.Machines != nil {
		t.Fatal(res, l)
	}
	got := l.String()
	for _, want := range []string{"plugin machiny: uninstall changes only Kubernetes objects", "controlPlane.flag kube-apiserver/audit-log-maxage", "nodes.label", "/team", "/tier", "kubeplug up -f cluster.yaml"} {
		if !strings.Contains(got, want) {
			t.Errorf("uninstall diagnostics:\n%s\nwant %q", got, want)
		}
	}
}

// TestUninstallWithoutACluster: an uninstall that cannot reach its cluster
// says so and still returns a result (nothing removed, no machines) for the
// caller to read, and a rollback says so too.
func TestUninstallWithoutACluster(t *testing.T) {
	cfg := &action.Config{NoBuiltin: true}
	nowhere := &rest.Config{Host: "https://127.0.0.1:1", Timeout: 5 * time.Second}
	u := action.NewUninstall(cfg)
	u.Target.RESTConfig = nowhere
	res, l := u.Run(t.Context(), "machiny")
	if res == nil || len(res.Removed) != 0 || res.Machines != nil {
		t.Errorf("result = %+v, want one that removed nothing", res)
	}
	if !l.HasFatal() || !strings.Contains(l.String(), "cannot reach the cluster") {
		t.Errorf("diagnostics:\n%s\nwant one saying the cluster cannot be reached", l)
	}
	rb := action.NewRollback(cfg)
	rb.Target.RESTConfig = nowhere
	if _, l := rb.Run(t.Context(), "machiny"); !l.HasFatal() || !strings.Contains(l.String(), "cannot reach the cluster") {
		t.Errorf("rollback diagnostics:\n%s\nwant one saying the cluster cannot be reached", l)
	}
}
