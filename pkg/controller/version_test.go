package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeplug/kubeplug/pkg/controller"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// versionProxy serves a real API server through a reverse proxy that answers
// GET /version with another Kubernetes version, and forwards everything else
// unchanged (as `kubectl proxy` does: it terminates TLS and calls the API
// server with the upstream credentials).
//
// That is a faithful stand-in for a cluster upgrade as far as the controller
// can tell: the controller learns a target's version only from /version (the
// TargetCluster's status and each installation's reconcile read it there, and
// `kubeplug apply` checks every plugin's kubernetesVersion against it), and a
// plugin's objects land in the real API server. What it cannot fake is an API
// that a new version stops serving; the plugins here use ConfigMaps, which
// every version serves.
type versionProxy struct {
	srv *httptest.Server
	mu  sync.Mutex
	ver string // the gitVersion answered, "v1.36.4"
}

func startVersionProxy(t testing.TB, upstream *rest.Config, gitVersion string) *versionProxy {
	t.Helper()
	u, err := url.Parse(upstream.Host)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rest.TransportFor(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &versionProxy{ver: gitVersion}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Header.Del("Authorization") // the upstream credentials are the proxy's
		},
		Transport:      tr,
		FlushInterval:  -1, // watches stream
		ModifyResponse: p.rewrite,
	}
	p.srv = httptest.NewTLSServer(rp)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *versionProxy) set(gitVersion string) {
	p.mu.Lock()
	p.ver = gitVersion
	p.mu.Unlock()
}

// rewrite changes the version answer, and only it.
func (p *versionProxy) rewrite(resp *http.Response) error {
	if resp.Request.Method != http.MethodGet || resp.Request.URL.Path != "/version" || resp.StatusCode != http.StatusOK {
		return nil
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	var info version.Info
	if err := json.Unmarshal(raw, &info); err != nil {
		return err
	}
	p.mu.Lock()
	info.GitVersion = p.ver
	p.mu.Unlock()
	parts := strings.SplitN(strings.TrimPrefix(info.GitVersion, "v"), ".", 3)
	info.Major, info.Minor = parts[0], parts[1]
	out, err := json.Marshal(info)
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", fmt.Sprint(len(out)))
	return nil
}

// kubeconfig is a kubeconfig for the proxy (its own CA, no credentials).
func (p *versionProxy) kubeconfig(t testing.TB) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.srv.URL, CertificateAuthorityData: pemCert(p.srv)}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	raw, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// versionedPackages: NAME-1.0.0.tgz … for each name and version, with that
// kubernetesVersion constraint, and one ConfigMap NAME in ns saying the version.
func versionedPackages(t testing.TB, ns string, pkgs map[string]string) map[string][]byte {
	out := map[string][]byte{}
	for nv, constraint := range pkgs {
		name, ver, _ := strings.Cut(nv, "@")
		out[name+"-"+ver+".tgz"] = pkgArchive(t, map[string]string{
			"plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: ` + name + `, version: ` + ver + `}
spec:
  kubernetesVersion: "` + constraint + `"
  contributes:
    kubernetes: {manifests: [m.yaml]}
`,
			"m.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: " + ns + "}\ndata: {version: \"" + ver + "\"}\n",
		})
	}
	return out
}

// TestTargetVersionMove upgrades a target cluster's Kubernetes version (1.36.4
// to 1.37.1, see versionProxy) under two installations, with no edit of
// either and an interval of an hour, so that only the version change can move
// them: vm-app, whose 1.0.0 needs Kubernetes <1.37 and 2.0.0 >=1.37, moves to
// 2.0.0; vm-legacy, with no version for 1.37, blocks its installation
// (Stalled, reason Refused, naming the plugin and its constraint) and stays
// installed as it was. A catalog revision that adds a vm-legacy for 1.37 then
// unblocks it.
func TestTargetVersionMove(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt, apps = "ctrl-version", "ctrl-version-apps"
	namespace(t, cs, mgmt)
	namespace(t, cs, apps)
	proxy := startVersionProxy(t, rc, "v1.36.4")

	pkgs := map[string]string{"vm-app@1.0.0": "<1.37", "vm-app@2.0.0": ">=1.37", "vm-legacy@1.0.0": "<1.37"}
	catalogConfigMap(t, cs, mgmt, "packages", versionedPackages(t, apps, pkgs))
	if _, err := cs.CoreV1().Secrets(mgmt).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "upgraded-kubeconfig", Namespace: mgmt},
		Data:       map[string][]byte{"kubeconfig": proxy.kubeconfig(t)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startController(t, rc, time.Hour)
	checkKstatus(t, dc, mgmt)
	create(t, dc, tgtGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: TargetCluster, metadata: {name: upgraded}, spec: {kubeconfigSecret: {name: upgraded-kubeconfig}}}`)
	create(t, dc, catGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: main}, spec: {sources: [{configMap: packages}]}}`)
	create(t, dc, instGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: app}, spec: {target: upgraded, catalogs: [main], plugins: [{name: vm-app, version: ">=1.0.0 <3"}]}}`)
	create(t, dc, instGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: legacy}, spec: {target: upgraded, catalogs: [main], plugins: [{name: vm-legacy}]}}`)
	uninstallAtEnd(t, dc, mgmt, "app", "legacy")

	installed := func(cs kubernetes.Interface, name string) string {
		cm, err := cs.CoreV1().ConfigMaps(apps).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return cm.Data["version"]
	}
	for _, name := range []string{"app", "legacy"} {
		u := readyAt(t, dc, instGVR, mgmt, name, 2*time.Minute)
		if v, _, _ := unstructured.NestedString(u.Object, "status", "kubernetesVersion"); v != "1.36.4" {
			t.Errorf("installation %s: status.kubernetesVersion %q, want 1.36.4 (the proxy's)", name, v)
		}
	}
	if got := installed(cs, "vm-app"); got != "1.0.0" {
		t.Fatalf("on Kubernetes 1.36.4, vm-app %s is installed, want 1.0.0 (2.0.0 needs >=1.37)", got)
	}

	// The upgrade.
	proxy.set("v1.37.1")
	waitFor(t, time.Minute, "the TargetCluster at 1.37.1", func() (bool, string) {
		u, err := dc.Resource(tgtGVR).Namespace(mgmt).Get(t.Context(), "upgraded", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		v, _, _ := unstructured.NestedString(u.Object, "status", "kubernetesVersion")
		return v == "1.37.1", v
	})
	waitFor(t, 2*time.Minute, "vm-app moved to 2.0.0", func() (bool, string) {
		u, err := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "app", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st, reason, msg := condition(u, "Ready")
		v, _, _ := unstructured.NestedString(u.Object, "status", "kubernetesVersion")
		plugins, _, _ := unstructured.NestedSlice(u.Object, "status", "plugins")
		return st == "True" && v == "1.37.1" && strings.Contains(fmt.Sprint(plugins), "version:2.0.0"),
			fmt.Sprintf("Ready=%s %s: %s; kubernetesVersion %s; plugins %v", st, reason, msg, v, plugins)
	})
	if got := installed(cs, "vm-app"); got != "2.0.0" {
		t.Errorf("after the upgrade, the vm-app ConfigMap says %s, want 2.0.0", got)
	}
	var stalledMsg string
	waitFor(t, 2*time.Minute, "legacy Stalled, naming vm-legacy and its constraint", func() (bool, string) {
		u, err := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "legacy", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st, reason, msg := condition(u, "Stalled")
		stalledMsg = msg
		return st == "True" && reason == controller.ReasonRefused && strings.Contains(msg, "vm-legacy") &&
			strings.Contains(msg, "1.37.1") && strings.Contains(msg, "<1.37"), st + " " + reason + ": " + msg
	})
	t.Logf("legacy: %s", stalledMsg)
	if got := installed(cs, "vm-legacy"); got != "1.0.0" {
		t.Errorf("the blocked installation changed the cluster: vm-legacy ConfigMap %s, want 1.0.0 left as it was", got)
	}

	// A catalog revision with a vm-legacy for 1.37 unblocks it, by itself.
	pkgs["vm-legacy@1.1.0"] = ">=1.37"
	cm, err := cs.CoreV1().ConfigMaps(mgmt).Get(t.Context(), "packages", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.BinaryData = versionedPackages(t, apps, pkgs)
	if _, err := cs.CoreV1().ConfigMaps(mgmt).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	readyAt(t, dc, instGVR, mgmt, "legacy", 2*time.Minute)
	if got := installed(cs, "vm-legacy"); got != "1.1.0" {
		t.Errorf("after the catalog revision, vm-legacy ConfigMap %s, want 1.1.0", got)
	}
}

// uninstallAtEnd deletes the installations when the test ends, while its
// controller still runs (cleanups run in reverse), and waits until they are
// gone.
func uninstallAtEnd(t *testing.T, dc dynamic.Interface, ns string, names ...string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		for _, name := range names {
			_ = dc.Resource(instGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
		}
		deadline := time.Now().Add(time.Minute)
		for _, name := range names {
			for time.Now().Before(deadline) {
				if _, err := dc.Resource(instGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	})
}

func pemCert(s *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}
