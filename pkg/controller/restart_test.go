package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/controller"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// runController runs a controller with its work directory at dir until the
// returned function stops it (or the test ends).
func runController(t *testing.T, rc *rest.Config, dir string) (stop func()) {
	t.Helper()
	c, err := controller.New(rc, controller.Options{
		Logger: testcluster.Logger(t), Action: &action.Config{NoBuiltin: true},
		MetricsAddr: "0", ProbeAddr: "0", WorkDir: dir, DefaultInterval: time.Hour,
		LeaseIdle: 200 * time.Millisecond, TargetResync: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("controller: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("the controller did not stop within a minute")
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestRestartReadsNoPackage: a controller restarted over converged
// installations and catalogs held in ConfigMaps unpacks and reads none of
// their packages (nothing changed: the installation's lastAppliedDigest and
// the catalog's status.listedFrom say so), while it still installs what is new.
func TestRestartReadsNoPackage(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt = "ctrl-restart"
	namespace(t, cs, mgmt)
	catalogConfigMap(t, cs, mgmt, "packages", catalogPackages(t, "ctrl-restart-apps", "rs-"))
	catalogConfigMap(t, cs, mgmt, "later", map[string][]byte{"later-1.0.0.tgz": pkg(t, "ctrl-restart-later", "rs-later", "1.0.0", "")})
	namespace(t, cs, "ctrl-restart-later")

	first := runController(t, rc, filepath.Join(t.TempDir(), "first"))
	create(t, dc, catGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: main}, spec: {sources: [{configMap: packages}]}}`)
	create(t, dc, instGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: web}, spec: {catalogs: [main], plugins: [{name: rs-app}]}}`)
	readyAt(t, dc, instGVR, mgmt, "web", 2*time.Minute)
	readyAt(t, dc, catGVR, mgmt, "main", time.Minute)
	first()

	work := filepath.Join(t.TempDir(), "second")
	runController(t, rc, work)
	uninstallAtEnd(t, dc, mgmt, "web", "probe")
	// Something new, so that the restarted controller is seen working.
	create(t, dc, catGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: later}, spec: {sources: [{configMap: later}]}}`)
	create(t, dc, instGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: probe}, spec: {catalogs: [later], plugins: [{name: rs-later}]}}`)
	readyAt(t, dc, instGVR, mgmt, "probe", 2*time.Minute)
	time.Sleep(2 * time.Second) // the restart's reconciles were queued before the probe's; let the last finish
	var unpacked []string
	_ = filepath.WalkDir(work, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.Contains(d.Name(), "@") {
			unpacked = append(unpacked, d.Name())
		}
		return nil
	})
	if len(unpacked) != 1 || !strings.HasPrefix(unpacked[0], "cm-later@") {
		t.Errorf("after the restart, the controller unpacked %v; want the new catalog's packages only", unpacked)
	}
	readyAt(t, dc, instGVR, mgmt, "web", time.Minute)
	readyAt(t, dc, catGVR, mgmt, "main", time.Minute)
}
