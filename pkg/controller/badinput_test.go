package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeplug/kubeplug/pkg/controller"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// pkg is a plugin package of one ConfigMap, NAME in ns, saying its version;
// requires is plugin.yaml's spec.requires (YAML flow), "" for none.
func pkg(t testing.TB, ns, name, version, requires string) []byte {
	spec := "spec:\n"
	if requires != "" {
		spec += "  requires: " + requires + "\n"
	}
	return pkgArchive(t, map[string]string{
		"plugin.yaml": "apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: " + name + ", version: " + version + "}\n" + spec +
			"  contributes:\n    kubernetes: {manifests: [m.yaml]}\n",
		"m.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: " + ns + "}\ndata: {version: \"" + version + "\"}\n",
	})
}

// installedVersion is what the ConfigMap of plugin name in ns says, or the error.
func installedVersion(t testing.TB, cs kubernetes.Interface, ns, name string) string {
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	return cm.Data["version"]
}

// TestCatalogRevisionBreaksSome: a new revision of a catalog that three
// installations share moves two of them to new versions, and breaks
// resolution for the third (its new version requires a version of a plugin the
// catalog does not have): that one is Stalled, naming the plugin and what it
// requires, and keeps what it had installed; the other two converge.
func TestCatalogRevisionBreaksSome(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt, apps = "ctrl-catrev", "ctrl-catrev-apps"
	namespace(t, cs, mgmt)
	namespace(t, cs, apps)
	catalogConfigMap(t, cs, mgmt, "packages", map[string][]byte{
		"cr-a-1.0.0.tgz":   pkg(t, apps, "cr-a", "1.0.0", ""),
		"cr-b-1.0.0.tgz":   pkg(t, apps, "cr-b", "1.0.0", ""),
		"cr-dep-1.0.0.tgz": pkg(t, apps, "cr-dep", "1.0.0", ""),
		"cr-c-1.0.0.tgz":   pkg(t, apps, "cr-c", "1.0.0", "[{name: cr-dep}]"),
	})
	startController(t, rc, time.Hour)
	checkKstatus(t, dc, mgmt)
	create(t, dc, catGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: main}, spec: {sources: [{configMap: packages}]}}`)
	names := []string{"a", "b", "c"}
	for _, n := range names {
		create(t, dc, instGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: `+n+`}, spec: {catalogs: [main], plugins: [{name: cr-`+n+`, version: ">=1.0.0"}]}}`)
	}
	uninstallAtEnd(t, dc, mgmt, names...)
	for _, n := range names {
		readyAt(t, dc, instGVR, mgmt, n, 2*time.Minute)
	}

	// The new revision: a and b 2.0.0; c only at 2.0.0, which needs cr-dep >=2.
	cm, err := cs.CoreV1().ConfigMaps(mgmt).Get(t.Context(), "packages", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.BinaryData = map[string][]byte{
		"cr-a-2.0.0.tgz":   pkg(t, apps, "cr-a", "2.0.0", ""),
		"cr-b-2.0.0.tgz":   pkg(t, apps, "cr-b", "2.0.0", ""),
		"cr-dep-1.0.0.tgz": pkg(t, apps, "cr-dep", "1.0.0", ""),
		"cr-c-2.0.0.tgz":   pkg(t, apps, "cr-c", "2.0.0", `[{name: cr-dep, version: ">=2.0.0"}]`),
	}
	if _, err := cs.CoreV1().ConfigMaps(mgmt).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		waitFor(t, 2*time.Minute, n+" moved to 2.0.0", func() (bool, string) {
			got := installedVersion(t, cs, apps, "cr-"+n)
			return got == "2.0.0", got
		})
		readyAt(t, dc, instGVR, mgmt, n, time.Minute)
	}
	waitFor(t, 2*time.Minute, "c Stalled, naming cr-c and cr-dep", func() (bool, string) {
		u, err := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "c", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st, reason, msg := condition(u, "Stalled")
		return st == "True" && strings.Contains(msg, "cr-dep") && strings.Contains(msg, ">=2.0.0"), st + " " + reason + ": " + msg
	})
	if got := installedVersion(t, cs, apps, "cr-c"); got != "1.0.0" {
		t.Errorf("the stalled installation changed the cluster: cr-c %s, want 1.0.0 as it was", got)
	}
	if got := installedVersion(t, cs, apps, "cr-dep"); got != "1.0.0" {
		t.Errorf("the stalled installation changed the cluster: cr-dep %s, want 1.0.0 as it was", got)
	}
}

// TestTargetCredentialsRevoked: of two target clusters, one's token is revoked
// (the object it is bound to deleted, so the API server refuses it): its
// TargetCluster is marked (Ready False, reason Unauthorized) and its
// installation retried (Reconciling, not Stalled), while an edit of the other
// installation converges meanwhile; a rotated kubeconfig Secret (a new token)
// brings the first back by itself.
func TestTargetCredentialsRevoked(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt = "ctrl-revoke"
	namespace(t, cs, mgmt)
	apps := map[string]string{"good": "ctrl-revoke-good", "revoked": "ctrl-revoke-revoked"}
	pkgs := map[string][]byte{}
	for name, ns := range apps {
		namespace(t, cs, ns)
		pkgs["rv-"+name+"-1.0.0.tgz"] = pkg(t, ns, "rv-"+name, "1.0.0", "")
		pkgs["rv-"+name+"-2.0.0.tgz"] = pkg(t, ns, "rv-"+name, "2.0.0", "")
	}
	catalogConfigMap(t, cs, mgmt, "packages", pkgs)

	// A service account of the management cluster with cluster-admin, its
	// token bound to a Secret: deleting the Secret revokes it.
	if _, err := cs.CoreV1().ServiceAccounts(mgmt).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ctrl-revoke-fleet"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "fleet", Namespace: mgmt}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(t.Context(), crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.WithoutCancel(t.Context()), crb.Name, metav1.DeleteOptions{})
	})
	token := func(anchor string) []byte {
		t.Helper()
		sec, err := cs.CoreV1().Secrets(mgmt).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: anchor}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(mgmt).CreateToken(t.Context(), "fleet", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr(int64(3600)),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: sec.Name, UID: sec.UID},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: caData(t)}
		cfg.AuthInfos["c"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
		cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "c"}
		cfg.CurrentContext = "c"
		raw, err := clientcmd.Write(*cfg)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	for _, name := range []string{"good", "revoked"} {
		if _, err := cs.CoreV1().Secrets(mgmt).Create(t.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig"}, Data: map[string][]byte{"kubeconfig": token(name + "-anchor")},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	startController(t, rc, time.Hour)
	checkKstatus(t, dc, mgmt)
	create(t, dc, catGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: main}, spec: {sources: [{configMap: packages}]}}`)
	for _, name := range []string{"good", "revoked"} {
		create(t, dc, tgtGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: TargetCluster, metadata: {name: `+name+`}, spec: {kubeconfigSecret: {name: `+name+`-kubeconfig}}}`)
		create(t, dc, instGVR, mgmt, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: `+name+`}, spec: {target: `+name+`, catalogs: [main], plugins: [{name: rv-`+name+`, version: 1.0.0}]}}`)
	}
	uninstallAtEnd(t, dc, mgmt, "good", "revoked")
	for _, name := range []string{"good", "revoked"} {
		readyAt(t, dc, instGVR, mgmt, name, 2*time.Minute)
	}

	// Revoke (the API server may keep accepting the token for the few seconds
	// it caches it), then ask both installations for 2.0.0.
	if err := cs.CoreV1().Secrets(mgmt).Delete(t.Context(), "revoked-anchor", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the revoked TargetCluster marked", func() (bool, string) {
		u, err := dc.Resource(tgtGVR).Namespace(mgmt).Get(t.Context(), "revoked", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st, reason, msg := condition(u, "Ready")
		return st == "False" && reason == controller.ReasonUnauthorized && strings.Contains(msg, "Unauthorized"), st + " " + reason + ": " + msg
	})
	for _, name := range []string{"good", "revoked"} {
		edit(t, dc, instGVR, mgmt, name, func(spec map[string]any) {
			spec["plugins"].([]any)[0].(map[string]any)["version"] = "2.0.0"
		})
	}
	readyAt(t, dc, instGVR, mgmt, "good", 2*time.Minute)
	if got := installedVersion(t, cs, apps["good"], "rv-good"); got != "2.0.0" {
		t.Errorf("the other target's plugin: %s, want 2.0.0", got)
	}
	waitFor(t, time.Minute, "the revoked target's installation retried, not stalled", func() (bool, string) {
		u, err := dc.Resource(instGVR).Namespace(mgmt).Get(t.Context(), "revoked", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		rec, reason, msg := condition(u, "Reconciling")
		stalled, _, _ := condition(u, "Stalled")
		return rec == "True" && stalled != "True" && strings.Contains(msg, "Unauthorized"), rec + " " + reason + ": " + msg
	})
	if got := installedVersion(t, cs, apps["revoked"], "rv-revoked"); got != "1.0.0" {
		t.Errorf("the revoked target's plugin: %s, want 1.0.0 left as it was", got)
	}

	// Rotated: a new token in the kubeconfig Secret.
	sec, err := cs.CoreV1().Secrets(mgmt).Get(t.Context(), "revoked-kubeconfig", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data["kubeconfig"] = token("revoked-anchor-2")
	if _, err := cs.CoreV1().Secrets(mgmt).Update(t.Context(), sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	readyAt(t, dc, instGVR, mgmt, "revoked", 2*time.Minute)
	if got := installedVersion(t, cs, apps["revoked"], "rv-revoked"); got != "2.0.0" {
		t.Errorf("after the rotation, the plugin: %s, want 2.0.0", got)
	}
	readyAt(t, dc, tgtGVR, mgmt, "revoked", time.Minute)
}

// caData is the management cluster's CA certificate.
func caData(t testing.TB) []byte {
	t.Helper()
	rc := testcluster.RESTConfig(t)
	if len(rc.CAData) > 0 {
		return rc.CAData
	}
	cfg, err := clientcmd.LoadFromFile(testcluster.ControlPlane(t).KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		if len(c.CertificateAuthorityData) > 0 {
			return c.CertificateAuthorityData
		}
	}
	t.Fatal("no CA in the management cluster's kubeconfig")
	return nil
}
