package controller_test

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// loopbackRegistry starts a registry on loopback until the test ends and
// returns its host:port.
func loopbackRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func imageRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// authedRegistry starts a registry on loopback that answers only requests
// with the basic credentials user and password, until the test ends.
func authedRegistry(t *testing.T, user, password string) string {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="site"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestExpansionSitePolicy: an installation's spec.expansionSite gives the
// expansions it passes a site registry and an allowlist, as --site-registry
// and the cluster file's spec.expansions.allow give them to the CLI. An
// expansion that skips a step the allowlist does not list is refused
// (Stalled, ExpansionRefused, naming the expansion, the step and the field)
// and nothing is applied; once the allowlist lists it, the expansion is
// merged, its image is pushed to the site registry under its rewritten name,
// and status.expansions names the skip; moved to a registry that refuses
// anonymous requests, the credentials of its dockerconfigjson Secret push it
// there; moved to a registry serving TLS with a certificate of its own CA,
// the CA Secret's certificate verifies it. A site registry whose credentials Secret does not exist, or whose CA
// Secret holds no certificate, is refused naming the field.
func TestExpansionSitePolicy(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt, apps = "ctrl-expsite", "ctrl-expsite-apps"
	namespace(t, cs, mgmt)

	src, site := loopbackRegistry(t), loopbackRegistry(t)
	img, err := random.Image(1<<10, 1)
	if err != nil {
		t.Fatal(err)
	}
	imgRef := src + "/team/app:v1"
	if err := remote.Write(imageRef(t, imgRef), img); err != nil {
		t.Fatal(err)
	}
	trusted, trustedPub := signer(t)
	expRef := "oci://" + src + "/expansions/site:1.0.0"
	pushExpansionWith(t, "sx", trusted, expRef, "  skipSteps: [validate]\n  images: ["+imgRef+"]\n")

	catalogConfigMap(t, cs, mgmt, "packages", catalogPackages(t, apps, "sx"))
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
  plugins: [{name: sxapp, version: 1.0.0, values: {message: hi}}]
  expansions: [{ref: "`+expRef+`", verifyKeys: site-keys}]
  expansionSite:
    registry: {address: "`+site+`"}
    allow: {skipSteps: [after-deploy, "plugin/*"]}
`)
	create(t, dc, instGVR, mgmt, `apiVersion: kubeplug.dev/v1alpha1
kind: PluginInstallation
metadata: {name: nocreds}
spec:
  catalogs: [main]
  target: self
  plugins: [{name: sxapp, version: 1.0.0}]
  expansions: [{ref: "`+expRef+`", verifyKeys: site-keys}]
  expansionSite:
    registry: {address: "`+site+`", credentialsSecret: absent}
`)

	if _, err := cs.CoreV1().Secrets(mgmt).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "not-a-ca", Namespace: mgmt},
		Data:       map[string][]byte{"ca.crt": []byte("not a certificate")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create(t, dc, instGVR, mgmt, `apiVersion: kubeplug.dev/v1alpha1
kind: PluginInstallation
metadata: {name: badca}
spec:
  catalogs: [main]
  target: self
  plugins: [{name: sxapp, version: 1.0.0}]
  expansions: [{ref: "`+expRef+`", verifyKeys: site-keys}]
  expansionSite:
    registry: {address: "`+site+`", caSecret: {name: not-a-ca}}
`)

	stalledWith := func(name string) (reason, msg string) {
		waitFor(t, time.Minute, name+" Stalled", func() (bool, string) {
			u, err := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			var st string
			st, reason, msg = condition(u, "Stalled")
			return st == "True", st + " " + reason + ": " + msg
		})
		return reason, msg
	}
	// Beyond the allowlist: refused, naming expansion, step and field.
	reason, msg := stalledWith("web")
	for _, want := range []string{expRef, "expansion site skips step validate", "the installation: spec.expansionSite.allow.skipSteps", "it allows after-deploy, plugin/*"} {
		if reason != "ExpansionRefused" || !strings.Contains(msg, want) {
			t.Errorf("Stalled: %s: %s; want ExpansionRefused with %q", reason, msg, want)
		}
	}
	if data, err := message(t, cs, apps); err == nil {
		t.Errorf("the refused installation applied something: app-settings = %v", data)
	}
	if _, err := remote.Head(imageRef(t, site+"/team/app:v1")); err == nil {
		t.Error("the refused expansion's image was pushed to the site registry")
	}
	// A Secret named by the site that does not exist.
	if reason, msg := stalledWith("nocreds"); !strings.Contains(msg, "spec.expansionSite.registry.credentialsSecret: Secret absent does not exist") {
		t.Errorf("nocreds Stalled: %s: %s", reason, msg)
	}
	if reason, msg := stalledWith("badca"); !strings.Contains(msg, `spec.expansionSite.registry.caSecret: Secret not-a-ca key "ca.crt" holds no PEM certificate`) {
		t.Errorf("badca Stalled: %s: %s", reason, msg)
	}

	// The allowlist lists the step: merged, the image in the site registry.
	edit(t, dc, instGVR, mgmt, "web", func(spec map[string]any) {
		spec["expansionSite"].(map[string]any)["allow"] = map[string]any{"skipSteps": []any{"validate"}}
	})
	u := readyAt(t, dc, instGVR, mgmt, "web", 2*time.Minute)
	if data, err := message(t, cs, apps); err != nil || data["message"] != "from-site" {
		t.Fatalf("app-settings = %v, %v; want the expansion's message from-site", data, err)
	}
	exps, _, _ := unstructured.NestedSlice(u.Object, "status", "expansions")
	if got := fmt.Sprint(exps); len(exps) != 1 || !strings.Contains(got, "skips:[step validate]") {
		t.Errorf("status.expansions = %s; want the skipped step", got)
	}
	want, _ := img.Digest()
	if d, err := remote.Head(imageRef(t, site+"/team/app:v1")); err != nil || d.Digest != want {
		t.Errorf("the site registry's team/app:v1: %v, %v; want %s", d, err, want)
	}

	// A site registry that refuses anonymous requests: the credentials of
	// the dockerconfigjson Secret push the image there.
	authed := authedRegistry(t, "site", "s3cret")
	if _, err := cs.CoreV1().Secrets(mgmt).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "site-pull", Namespace: mgmt}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: fmt.Appendf(nil, `{"auths": {%q: {"auth": %q}}}`, authed, base64.StdEncoding.EncodeToString([]byte("site:s3cret")))},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	edit(t, dc, instGVR, mgmt, "web", func(spec map[string]any) {
		spec["expansionSite"].(map[string]any)["registry"] = map[string]any{"address": authed, "credentialsSecret": "site-pull"}
	})
	readyAt(t, dc, instGVR, mgmt, "web", 2*time.Minute)
	if _, err := remote.Head(imageRef(t, authed+"/team/app:v1")); err == nil {
		t.Error("the authenticated registry answers anonymous requests: the test proves nothing")
	}
	basic := remote.WithAuth(&authn.Basic{Username: "site", Password: "s3cret"})
	if d, err := remote.Head(imageRef(t, authed+"/team/app:v1"), basic); err != nil || d.Digest != want {
		t.Errorf("the authenticated site registry's team/app:v1: %v, %v; want %s", d, err, want)
	}

	// A site registry serving TLS with a certificate of its own CA: the CA
	// Secret's certificate verifies it.
	tlsSrv := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(tlsSrv.Close)
	tlsHost := strings.TrimPrefix(tlsSrv.URL, "https://")
	if _, err := cs.CoreV1().Secrets(mgmt).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "site-ca", Namespace: mgmt},
		Data:       map[string][]byte{"ca.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	edit(t, dc, instGVR, mgmt, "web", func(spec map[string]any) {
		spec["expansionSite"].(map[string]any)["registry"] = map[string]any{"address": tlsHost, "caSecret": map[string]any{"name": "site-ca"}}
	})
	readyAt(t, dc, instGVR, mgmt, "web", 2*time.Minute)
	if d, err := remote.Head(imageRef(t, tlsHost+"/team/app:v1"), remote.WithTransport(tlsSrv.Client().Transport)); err != nil || d.Digest != want {
		t.Errorf("the TLS site registry's team/app:v1: %v, %v; want %s", d, err, want)
	}

	for _, name := range []string{"web", "nocreds", "badca"} {
		if err := dc.Resource(instGVR).Namespace(mgmt).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}
	waitFor(t, time.Minute, "the installations gone", func() (bool, string) {
		l, err := dc.Resource(instGVR).Namespace(mgmt).List(t.Context(), metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, fmt.Sprint(err)
	})
}
