package deploy_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// testChart is a chart with a ConfigMap holding .Values.message and a Deployment
// that can never schedule when .Values.stuck is set.
func testChart(t testing.TB) *chartv2.Chart {
	t.Helper()
	files := []*archive.BufferedFile{
		{Name: "Chart.yaml", Data: []byte("apiVersion: v2\nname: web\nversion: 0.1.0\n")},
		{Name: "values.yaml", Data: []byte("message: hello\nstuck: false\n")},
		{Name: "templates/cm.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-msg}
data: {message: {{ .Values.message | quote }}}
`)},
		{Name: "templates/deploy.yaml", Data: []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}}
spec:
  replicas: 1
  progressDeadlineSeconds: 2
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec:
      {{- if .Values.stuck }}
      nodeSelector: {no-such-node: "true"}
      {{- end }}
      containers: [{name: c, image: registry.example/c:1}]
`)},
	}
	c, err := loader.LoadFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// revision returns the newest revision of a release and its status, from the
// Secrets Helm stores release records in (as `helm list` reads them); 0 if none.
func revision(t testing.TB, ns, name string) (int, string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(testcluster.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	best, status := 0, ""
	for _, s := range list.Items {
		if v, _ := strconv.Atoi(s.Labels["version"]); v > best {
			best, status = v, s.Labels["status"]
		}
	}
	return best, status
}

func message(t testing.TB, ns, name string) string {
	t.Helper()
	got, err := dyn(t).Resource(cmGVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Object["data"].(map[string]any)["message"].(string)
}

func TestHelmInstallUpgradeRollbackUninstall(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "helm")
	chrt := testChart(t)
	d := newDeployer(t, deploy.Options{Timeout: time.Minute, RollbackOnFailure: true})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	apply := func(d *deploy.Deployer, values map[string]any) error {
		_, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: objs(t, ns, `
apiVersion: v1
kind: ConfigMap
metadata: {name: plain, namespace: NS}
`), Releases: []deploy.HelmRelease{{Name: "web", Namespace: ns, Chart: chrt, Values: values}}}})
		return err
	}

	// Install.
	if err := apply(d, map[string]any{"message": "one"}); err != nil {
		t.Fatal(err)
	}
	if rev, st := revision(t, ns, "web"); rev != 1 || st != "deployed" {
		t.Fatalf("after install: revision %d %s, want 1 deployed", rev, st)
	}
	inv := inventory(t, d, plugin)
	if inv == nil || !slices.Contains(inv.Releases, deploy.ReleaseRef{Namespace: ns, Name: "web"}) || len(inv.Objects) != 3 {
		t.Fatalf("inventory = %+v, want the release and 3 objects (plain, web-msg, web)", inv)
	}

	// Unchanged: no new revision.
	if err := apply(d, map[string]any{"message": "one"}); err != nil {
		t.Fatal(err)
	}
	if rev, _ := revision(t, ns, "web"); rev != 1 {
		t.Errorf("an unchanged re-apply made revision %d", rev)
	}

	// Upgrade on a values change.
	if err := apply(d, map[string]any{"message": "two"}); err != nil {
		t.Fatal(err)
	}
	if rev, st := revision(t, ns, "web"); rev != 2 || st != "deployed" {
		t.Errorf("after upgrade: revision %d %s, want 2 deployed", rev, st)
	}
	if m := message(t, ns, "web-msg"); m != "two" {
		t.Errorf("message after upgrade = %q", m)
	}

	// A failing upgrade is rolled back.
	short := newDeployer(t, deploy.Options{Timeout: 6 * time.Second, RollbackOnFailure: true})
	err := apply(short, map[string]any{"message": "three", "stuck": true})
	if err == nil {
		t.Fatal("an upgrade whose Deployment cannot schedule succeeded")
	}
	for _, want := range []string{"Deployment.apps/" + ns + "/web", "rolled back 1 Helm release"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if rev, st := revision(t, ns, "web"); rev != 4 || st != "deployed" {
		t.Errorf("after rollback: revision %d %s, want 4 deployed", rev, st)
	}
	if m := message(t, ns, "web-msg"); m != "two" {
		t.Errorf("message after rollback = %q, want two", m)
	}

	// Uninstall removes the release, its objects and the plugin's own.
	if _, err := d.Uninstall(t.Context(), []string{plugin}, false); err != nil {
		t.Fatal(err)
	}
	if rev, _ := revision(t, ns, "web"); rev != 0 {
		t.Errorf("release records left after uninstall: revision %d", rev)
	}
	for _, name := range []string{"web-msg", "plain"} {
		if exists(t, cmGVR, ns, name) {
			t.Errorf("ConfigMap %s left after uninstall", name)
		}
	}
}

func TestHelmDroppedReleaseIsUninstalled(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "drop")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	rel := deploy.HelmRelease{Name: "web", Namespace: ns, Chart: testChart(t)}
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1", Releases: []deploy.HelmRelease{rel}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "2", Objects: objs(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain, namespace: NS}\n")}}); err != nil {
		t.Fatal(err)
	}
	if rev, _ := revision(t, ns, "web"); rev != 0 {
		t.Errorf("a dropped release is still installed (revision %d)", rev)
	}
	if inv := inventory(t, d, plugin); inv == nil || len(inv.Releases) != 0 || len(inv.Objects) != 1 {
		t.Errorf("inventory = %+v, want only the ConfigMap", inv)
	}
}

func TestHelmPendingReleaseIsRecovered(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pending   rcommon.Status
		installed bool // a deployed revision precedes the pending one
		wantRev   int
	}{
		// Never finished installing: uninstalled, then installed afresh.
		{name: "pending-install", pending: rcommon.StatusPendingInstall, wantRev: 1},
		// Crashed mid-upgrade: rolled back to 1 (revision 3), then upgraded (4).
		{name: "pending-upgrade", pending: rcommon.StatusPendingUpgrade, installed: true, wantRev: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := testcluster.Namespace(t)
			plugin := unique(t, "pending")
			chrt := testChart(t)
			d := newDeployer(t, deploy.Options{Timeout: time.Minute})
			t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
			unit := func(msg string) []deploy.Unit {
				return []deploy.Unit{{Plugin: plugin, Version: "1", Releases: []deploy.HelmRelease{{Name: "web", Namespace: ns, Chart: chrt, Values: map[string]any{"message": msg}}}}}
			}
			next := 1
			if tc.installed {
				if _, err := d.ApplyWave(t.Context(), 0, unit("one")); err != nil {
					t.Fatal(err)
				}
				next = 2
			}
			// Forge what a run killed mid-operation leaves: the newest record pending.
			cfg, err := d.HelmConfig(ns)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			if err := cfg.Releases.Create(&releasev1.Release{
				Name: "web", Namespace: ns, Version: next, Chart: chrt, Config: map[string]any{"message": "crashed"},
				Info: &releasev1.Info{Status: tc.pending, FirstDeployed: now, LastDeployed: now, Description: "killed"},
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := d.ApplyWave(t.Context(), 0, unit("two")); err != nil {
				t.Fatalf("apply over a %s release: %v", tc.pending, err)
			}
			if rev, st := revision(t, ns, "web"); rev != tc.wantRev || st != "deployed" {
				t.Errorf("revision %d %s, want %d deployed", rev, st, tc.wantRev)
			}
			if m := message(t, ns, "web-msg"); m != "two" {
				t.Errorf("message = %q, want two", m)
			}
		})
	}
}

// Without RollbackOnFailure a release whose objects do not become ready is marked
// failed, so `helm list` tells the truth and the next apply upgrades it again.
func TestHelmNotReadyWithoutRollbackIsMarkedFailed(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "failed")
	chrt := testChart(t)
	d := newDeployer(t, deploy.Options{Timeout: 4 * time.Second})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	units := func(stuck bool) []deploy.Unit {
		return []deploy.Unit{{Plugin: plugin, Version: "1", Releases: []deploy.HelmRelease{{Name: "web", Namespace: ns, Chart: chrt, Values: map[string]any{"stuck": stuck}}}}}
	}
	if _, err := d.ApplyWave(t.Context(), 0, units(true)); err == nil {
		t.Fatal("a Deployment that cannot schedule became ready")
	}
	if rev, st := revision(t, ns, "web"); rev != 1 || st != "failed" {
		t.Errorf("after a failed install: revision %d %s, want 1 failed", rev, st)
	}
	if inv := inventory(t, d, plugin); inv == nil || inv.Phase != deploy.PhaseFailed || len(inv.Releases) != 1 {
		t.Errorf("inventory = %+v, want Failed with the release", inv)
	}
	// A release that never deployed is installed afresh.
	if _, err := d.ApplyWave(t.Context(), 0, units(false)); err != nil {
		t.Fatal(err)
	}
	if rev, st := revision(t, ns, "web"); rev != 1 || st != "deployed" {
		t.Errorf("after the fix: revision %d %s, want 1 deployed", rev, st)
	}
}
