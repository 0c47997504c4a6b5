package controller_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kubeplug/kubeplug/pkg/expansion"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/sign"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// pushExpansion packs an expansion that sets PREFIXapp's message to
// from-site, signed with key, and pushes it to ref.
func pushExpansion(t *testing.T, prefix string, key *sign.Signer, ref string) {
	t.Helper()
	pushExpansionWith(t, prefix, key, ref, "")
}

// pushExpansionWith is pushExpansion with more of the manifest's spec (YAML
// lines indented by two spaces).
func pushExpansionWith(t *testing.T, prefix string, key *sign.Signer, ref, spec string) {
	t.Helper()
	pushExpansionFiles(t, key, ref, map[string]string{"expansion.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Expansion
metadata: {name: site, version: 1.0.0}
spec:
  overrides:
    plugins:
      ` + prefix + `app: {message: from-site}
` + spec})
}

// pushExpansionFiles packs the expansion of files (expansion.yaml and what
// it names), signed with key, and pushes it to ref.
func pushExpansionFiles(t *testing.T, key *sign.Signer, ref string, files map[string]string) {
	t.Helper()
	src := t.TempDir()
	for name, text := range files {
		path := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "site.tar")
	if _, l := expansion.Create(t.Context(), src, out, expansion.CreateOptions{Signer: key}); l.HasFatal() {
		t.Fatal(l)
	}
	pkg, l := expansion.Open(t.Context(), out, expansion.Limits{})
	if l.HasFatal() {
		t.Fatal(l)
	}
	c, err := oci.New(oci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PushExpansion(t.Context(), out, ref, oci.ExpansionConfig{Name: pkg.Name(), Version: "1.0.0", Digest: pkg.Digest()}); err != nil {
		t.Fatal(err)
	}
}

func signer(t *testing.T) (*sign.Signer, []byte) {
	t.Helper()
	kp, err := sign.GenerateKeyPair(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadSigner(kp.Private, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, kp.Public
}

// TestExpansionPassThrough: the controller pulls an installation's
// expansion from a registry on loopback, verifies it against the keys of its
// verifyKeys ConfigMap and merges it into the apply (the expansion's value
// override reaches the cluster, the status names the expansion, its signer
// and the target); suspendExpansions on the TargetCluster, then on the
// installation, applies without it (the cluster back to the default); an
// expansion signed by a key the ConfigMap does not hold is refused, naming
// the reference and the keys, and nothing of its installation is applied.
func TestExpansionPassThrough(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt, apps, rogueApps = "ctrl-passthrough", "ctrl-passthrough-apps", "ctrl-passthrough-rogue"
	namespace(t, cs, mgmt)

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	trusted, trustedPub := signer(t)
	rogue, _ := signer(t)
	signedRef := "oci://" + host + "/expansions/site:1.0.0"
	rogueRef := "oci://" + host + "/expansions/rogue:1.0.0"
	pushExpansion(t, "px", trusted, signedRef)
	pushExpansion(t, "py", rogue, rogueRef)

	pkgs := catalogPackages(t, apps, "px")
	for k, v := range catalogPackages(t, rogueApps, "py") {
		pkgs["py-"+k] = v
	}
	catalogConfigMap(t, cs, mgmt, "packages", pkgs)
	if _, err := cs.CoreV1().ConfigMaps(mgmt).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "site-keys", Namespace: mgmt},
		Data:       map[string]string{"site.pub": string(trustedPub)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig(t, cs, mgmt, "self", testcluster.ControlPlane(t).KubeconfigPath(), "site")
	startController(t, rc, time.Hour)

	create(t, dc, catGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: main}, spec: {sources: [{configMap: packages}]}}`)
	create(t, dc, instGVR, mgmt, `apiVersion: kubeplug.dev/v1alpha1
kind: PluginInstallation
metadata: {name: web}
spec:
  catalogs: [main]
  target: self
  plugins: [{name: pxapp, version: 1.0.0, values: {message: hi}}]
  expansions: [{ref: "`+signedRef+`", verifyKeys: site-keys}]
`)
	create(t, dc, instGVR, mgmt, `apiVersion: kubeplug.dev/v1alpha1
kind: PluginInstallation
metadata: {name: rogue}
spec:
  catalogs: [main]
  target: self
  plugins: [{name: pyapp, version: 1.0.0, values: {message: hi}}]
  expansions: [{ref: "`+rogueRef+`", verifyKeys: site-keys}]
`)

	// Signed by a trusted key: merged, and the status says what and where.
	u := readyAt(t, dc, instGVR, mgmt, "web", 2*time.Minute)
	if data, err := message(t, cs, apps); err != nil || data["message"] != "from-site" {
		t.Fatalf("app-settings = %v, %v; want the expansion's message from-site", data, err)
	}
	exps, _, _ := unstructured.NestedSlice(u.Object, "status", "expansions")
	trustedID := trusted.KeyID()
	if got := fmt.Sprint(exps); len(exps) != 1 || !strings.Contains(got, "name:site") || !strings.Contains(got, "signedBy:"+trustedID) ||
		!strings.Contains(got, "target:self") || !strings.Contains(got, "ref:"+signedRef) || !strings.Contains(got, "digest:sha256:") {
		t.Errorf("status.expansions = %s", got)
	}
	if _, _, msg := condition(u, "Ready"); !strings.Contains(msg, "with expansion(s) site 1.0.0 ("+signedRef+", signed by "+trustedID+")") {
		t.Errorf("Ready message = %q", msg)
	}

	// Signed by a key site-keys does not hold: refused, nothing applied.
	waitFor(t, time.Minute, "the rogue installation Stalled", func() (bool, string) {
		u, err := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "rogue", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st, reason, msg := condition(u, "Stalled")
		if st != "True" {
			return false, st + " " + reason + ": " + msg
		}
		if reason != "ExpansionRefused" || !strings.Contains(msg, rogueRef) || !strings.Contains(msg, "site.pub") || !strings.Contains(msg, trustedID) || !strings.Contains(msg, "ConfigMap "+mgmt+"/site-keys") {
			t.Errorf("Stalled: %s: %s", reason, msg)
		}
		return true, ""
	})
	if data, err := message(t, cs, rogueApps); err == nil {
		t.Errorf("the refused installation applied something: app-settings = %v", data)
	}

	// The target's switch: applied without the expansion, back to the default.
	switchOff := func(what string) {
		t.Helper()
		waitFor(t, time.Minute, "the value without the expansion ("+what+")", func() (bool, string) {
			data, err := message(t, cs, apps)
			if err != nil || data["message"] != "hi" {
				return false, fmt.Sprint(data, err)
			}
			u, err := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			exps, _, _ := unstructured.NestedSlice(u.Object, "status", "expansions")
			_, _, msg := condition(u, "Ready")
			return len(exps) == 0 && strings.Contains(msg, "expansions not passed: suspended by "+what), fmt.Sprint(exps, msg)
		})
	}
	edit(t, dc, tgtGVR, mgmt, "self", func(spec map[string]any) { spec["suspendExpansions"] = true })
	switchOff("spec.suspendExpansions of TargetCluster " + mgmt + "/self")
	edit(t, dc, tgtGVR, mgmt, "self", func(spec map[string]any) { delete(spec, "suspendExpansions") })
	waitFor(t, time.Minute, "the expansion passed again", func() (bool, string) {
		data, err := message(t, cs, apps)
		return err == nil && data["message"] == "from-site", fmt.Sprint(data, err)
	})
	// The installation's (a rollout's template's) switch.
	edit(t, dc, instGVR, mgmt, "web", func(spec map[string]any) { spec["suspendExpansions"] = true })
	switchOff("spec.suspendExpansions of the installation")

	for _, name := range []string{"web", "rogue"} {
		if err := dc.Resource(instGVR).Namespace(mgmt).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}
	waitFor(t, time.Minute, "the installations gone", func() (bool, string) {
		l, err := dc.Resource(instGVR).Namespace(mgmt).List(t.Context(), metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, fmt.Sprint(err)
	})
}
