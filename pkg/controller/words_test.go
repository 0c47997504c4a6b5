package controller_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/controller"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// wordsPlugin is a plugin.yaml of prefix+name 1.0.0 with a ConfigMap in ns,
// and extra contributions.
func wordsPlugin(name, extra string) string {
	return "apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: " + name + ", version: 1.0.0}\nspec:\n  contributes:\n" + extra +
		"    kubernetes: {manifests: [m.yaml]}\n"
}

func wordsManifest(ns, name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: " + ns + "}\n"
}

// machineExtra contributes an API-server flag: something only a provider
// applies, never the controller.
const machineExtra = "    controlPlane: {apiServer: {flags: {audit-log-maxage: \"7\"}}}\n"

// TestInstallationSaysWhatItDoesNot: the controller says what it does not do.
// A plugin the CLI installed is not taken over silently (Stalled, reason
// OwnedByCLI, naming the field that adopts it) until spec.adopt says so (an
// event says it was adopted), and kubeplug status then names the installation
// as its owner; a plugin's machine contributions are named by a condition and
// an event as not applied, and again, as staying, when the installation is
// deleted.
func TestInstallationSaysWhatItDoesNot(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt, apps = "ctrl-words", "ctrl-words-apps"
	namespace(t, cs, mgmt)
	namespace(t, cs, apps)
	catalogConfigMap(t, cs, mgmt, "packages", map[string][]byte{
		"wcli-1.0.0.tgz":     pkgArchive(t, map[string]string{"plugin.yaml": wordsPlugin("wcli", ""), "m.yaml": wordsManifest(apps, "wcli")}),
		"wmachine-1.0.0.tgz": pkgArchive(t, map[string]string{"plugin.yaml": wordsPlugin("wmachine", machineExtra), "m.yaml": wordsManifest(apps, "wmachine")}),
	})

	// The CLI installs wcli from a directory.
	dir := t.TempDir()
	for name, text := range map[string]string{
		"plugins/wcli/plugin.yaml": wordsPlugin("wcli", ""),
		"plugins/wcli/m.yaml":      wordsManifest(apps, "wcli"),
		"cluster.yaml":             "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: words}\nspec:\n  kubernetesVersion: 1.37.1\n  plugins:\n    sources: [{dir: ./plugins}]\n    enabled: [{name: wcli}]\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &action.Config{NoBuiltin: true}
	cl, l := config.Load(filepath.Join(dir, "cluster.yaml"))
	if l.HasFatal() {
		t.Fatal(l)
	}
	a := action.NewApply(cfg)
	a.Target.RESTConfig = rc
	a.Timeout = time.Minute
	a.Lease = action.Lease{Wait: 30 * time.Second}
	if _, l := a.Run(t.Context(), cl); l.HasFatal() {
		t.Fatal(l)
	}

	startController(t, rc, time.Hour)
	create(t, dc, catGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: main}, spec: {sources: [{configMap: packages}]}}`)

	// Not adopted silently: Stalled, naming the CLI and the field.
	create(t, dc, instGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: takeover}, spec: {catalogs: [main], plugins: [{name: wcli}]}}`)
	waitFor(t, time.Minute, "takeover Stalled: wcli is the CLI's", func() (bool, string) {
		u, _ := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "takeover", metav1.GetOptions{})
		st, reason, msg := condition(u, "Stalled")
		rec, _, _ := condition(u, "Reconciling")
		return st == "True" && rec != "True" && reason == controller.ReasonOwnedByCLI &&
			strings.Contains(msg, "plugin wcli is managed by the CLI") && strings.Contains(msg, "set spec.adopt: true"), fmt.Sprint(u.Object["status"])
	})
	if out := cliStatus(t); !strings.Contains(out, "wcli") || !fieldsHave(out, "wcli", "cli") {
		t.Errorf("kubeplug status before the adoption:\n%s", out)
	}

	// Adopted when the spec says so, with an event; status names the owner.
	edit(t, dc, instGVR, mgmt, "takeover", func(spec map[string]any) { spec["adopt"] = true })
	readyAt(t, dc, instGVR, mgmt, "takeover", time.Minute)
	waitEvent(t, cs, mgmt, "takeover", controller.ReasonAdopted, "adopted plugin wcli")
	if out := cliStatus(t); !fieldsHave(out, "wcli", mgmt+"/takeover") {
		t.Errorf("kubeplug status does not name the installation as wcli's owner:\n%s", out)
	}

	// Machine contributions: a condition and an event say they are not applied.
	create(t, dc, instGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: machine}, spec: {catalogs: [main], plugins: [{name: wmachine}]}}`)
	u := readyAt(t, dc, instGVR, mgmt, "machine", time.Minute)
	st, reason, msg := condition(u, controller.ConditionMachineNotApplied)
	if st != "True" || reason != controller.ReasonMachineContributions || !strings.Contains(msg, "plugin wmachine") || !strings.Contains(msg, "audit-log-maxage") || !strings.Contains(msg, "leaves them as they are") {
		t.Errorf("condition %s = %s %s: %s", controller.ConditionMachineNotApplied, st, reason, msg)
	}
	waitEvent(t, cs, mgmt, "machine", controller.ReasonMachineContributions, "did not apply the machine contributions of plugin wmachine")
	if st, _, _ := condition(readyAt(t, dc, instGVR, mgmt, "takeover", time.Minute), controller.ConditionMachineNotApplied); st != "" {
		t.Errorf("an installation without machine contributions has condition %s %s", controller.ConditionMachineNotApplied, st)
	}
	if err := dc.Resource(instGVR).Namespace(mgmt).Delete(t.Context(), "machine", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, cs, mgmt, "machine", controller.ReasonMachineContributions, "uninstalled the Kubernetes objects only")

	if err := dc.Resource(instGVR).Namespace(mgmt).Delete(t.Context(), "takeover", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "wcli uninstalled with its installation", func() (bool, string) {
		_, err := cs.CoreV1().ConfigMaps(apps).Get(t.Context(), "wcli", metav1.GetOptions{})
		return err != nil, "wcli's ConfigMap is still there"
	})
}

// cliStatus runs `kubeplug status` against the test cluster.
func cliStatus(t *testing.T) string {
	t.Helper()
	var out, errb bytes.Buffer
	args := []string{"status", "--kubeconfig", testcluster.ControlPlane(t).KubeconfigPath()}
	if code := cmd.Main(context.WithoutCancel(t.Context()), args, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &errb}); code != 0 {
		t.Fatalf("kubeplug status: exit %d: %s", code, errb.String())
	}
	return out.String()
}

// fieldsHave reports whether the table row of plugin holds a field equal to want.
func fieldsHave(table, plugin, want string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != plugin {
			continue
		}
		for _, x := range f[1:] {
			if x == want {
				return true
			}
		}
	}
	return false
}

// waitEvent waits for an event about the installation name with reason and a
// note holding text.
func waitEvent(t *testing.T, cs kubernetes.Interface, ns, name, reason, text string) {
	t.Helper()
	waitFor(t, 30*time.Second, "event "+reason+" on "+name, func() (bool, string) {
		list, err := cs.EventsV1().Events(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if matchEvent(e, name, reason, text) {
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Note)
		}
		return false, strings.Join(seen, "\n")
	})
}

func matchEvent(e eventsv1.Event, name, reason, text string) bool {
	return e.Regarding.Name == name && e.Reason == reason && strings.Contains(e.Note, text)
}
