package serving

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

func testObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	apis := []v1alpha1.ServedAPI{{Group: "widgets.example.com", Versions: []string{"v1alpha1", "v1"}, Service: v1alpha1.ServiceRef{Namespace: "wx", Name: "api"}}}
	hooks := []v1alpha1.Webhook{
		{Name: "deny.example.com", Type: v1alpha1.WebhookValidating, Service: v1alpha1.ServiceRef{Namespace: "wx", Name: "api"}, Path: "/validate",
			Rules: []v1alpha1.WebhookRule{{Operations: []string{"CREATE"}, APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
	}
	var out []*unstructured.Unstructured
	for _, o := range Objects("widgets", apis, hooks) {
		out = append(out, &unstructured.Unstructured{Object: o})
	}
	return out
}

func TestObjects(t *testing.T) {
	objs := testObjects(t)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	want := []string{
		"Secret wx/api-serving-ca", "Secret wx/api-serving-cert",
		"ClusterRoleBinding /kubeplug:widgets:wx:api:auth-delegator", "RoleBinding kube-system/kubeplug:widgets:wx:api:auth-reader",
		"APIService /v1alpha1.widgets.example.com", "APIService /v1.widgets.example.com",
		"ValidatingWebhookConfiguration /kubeplug-widgets",
		"Role wx/kubeplug:widgets:widgets.example.com:storage", "RoleBinding wx/kubeplug:widgets:widgets.example.com:storage",
		"ValidatingAdmissionPolicy /kubeplug-widgets-storage-widgets.example.com",
		"ValidatingAdmissionPolicyBinding /kubeplug-widgets-storage-widgets.example.com",
	}
	if strings.Join(kinds, "\n") != strings.Join(want, "\n") {
		t.Fatalf("objects:\n%s\nwant:\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}
	wh, _, _ := unstructured.NestedSlice(objs[6].Object, "webhooks")
	h := wh[0].(map[string]any)
	if h["failurePolicy"] != "Ignore" || h["timeoutSeconds"] != int64(5) || h["sideEffects"] != "None" {
		t.Errorf("webhook defaults: %v", h)
	}
	sel := h["namespaceSelector"].(map[string]any)["matchExpressions"].([]any)[0].(map[string]any)
	for _, ns := range []string{"kube-system", "kubeplug-system", "wx"} {
		if !strings.Contains(strings.Join(anyStrings(sel["values"]), ","), ns) {
			t.Errorf("default namespace selector does not exclude %s: %v", ns, sel)
		}
	}
}

func anyStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// cluster is live Secrets in memory, as Inject's lookup sees them.
type cluster map[string]*unstructured.Unstructured

func (c cluster) get(_ context.Context, ns, name string) (*unstructured.Unstructured, error) {
	return c[ns+"/"+name], nil
}

func (c cluster) apply(filled map[int]*unstructured.Unstructured) {
	for _, o := range filled {
		if o.GetKind() == "Secret" {
			c[o.GetNamespace()+"/"+o.GetName()] = o
		}
	}
}

func data(t *testing.T, o *unstructured.Unstructured, key string) []byte {
	t.Helper()
	return secretData(o, key)
}

func TestInjectIssuesReusesAndRotates(t *testing.T) {
	objs := testObjects(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := Policy{CAValidity: 30 * time.Hour, CertValidity: 3 * time.Hour, Now: func() time.Time { return now }}
	live := cluster{}
	first, err := Inject(t.Context(), objs, live.get, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if v, _, _ := unstructured.NestedString(o.Object, "data", "tls.crt"); v != "" {
			t.Fatal("Inject changed its input")
		}
	}
	live.apply(first)
	cert, ca := first[1], first[0]
	leaf, err := parseCert(data(t, cert, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(data(t, cert, "ca.crt"))
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "api.wx.svc", Roots: pool, CurrentTime: now}); err != nil {
		t.Fatalf("serving certificate does not verify for api.wx.svc: %v", err)
	}
	bundle, _, _ := unstructured.NestedString(first[4].Object, "spec", "caBundle")
	if want := base64.StdEncoding.EncodeToString(data(t, ca, "bundle.crt")); bundle != want {
		t.Errorf("APIService caBundle is not the CA bundle")
	}
	wh, _, _ := unstructured.NestedSlice(first[6].Object, "webhooks")
	if b, _, _ := unstructured.NestedString(wh[0].(map[string]any), "clientConfig", "caBundle"); b != bundle {
		t.Errorf("webhook caBundle is not the CA bundle")
	}

	// An hour later nothing is due: the same bytes, so the apply changes nothing.
	now = now.Add(time.Hour)
	second, err := Inject(t.Context(), objs, live.get, p)
	if err != nil {
		t.Fatal(err)
	}
	if string(data(t, second[1], "tls.crt")) != string(data(t, cert, "tls.crt")) || string(data(t, second[0], "ca.crt")) != string(data(t, ca, "ca.crt")) {
		t.Fatal("a fresh certificate was replaced")
	}

	// Past two thirds of its 3h lifetime the certificate is renewed by the same CA.
	now = now.Add(time.Hour + 5*time.Minute)
	third, err := Inject(t.Context(), objs, live.get, p)
	if err != nil {
		t.Fatal(err)
	}
	if string(data(t, third[1], "tls.crt")) == string(data(t, cert, "tls.crt")) {
		t.Fatal("a certificate past two thirds of its lifetime was kept")
	}
	if string(data(t, third[0], "ca.crt")) != string(data(t, ca, "ca.crt")) {
		t.Fatal("the CA was rotated with the certificate")
	}
	live.apply(third)

	// Past two thirds of the CA's lifetime: a new CA, the old one still in the
	// bundle (so what the server still presents stays trusted), and the expired
	// certificate renewed by the new CA.
	now = now.Add(19 * time.Hour)
	fourth, err := Inject(t.Context(), objs, live.get, p)
	if err != nil {
		t.Fatal(err)
	}
	if string(data(t, fourth[0], "ca.crt")) == string(data(t, ca, "ca.crt")) {
		t.Fatal("a CA past two thirds of its lifetime was kept")
	}
	newBundle := data(t, fourth[0], "bundle.crt")
	if n := len(splitPEM(newBundle)); n != 2 {
		t.Fatalf("bundle after CA rotation has %d certificates, want the new and the old CA", n)
	}
	pool = x509.NewCertPool()
	pool.AppendCertsFromPEM(newBundle)
	served, _ := parseCert(data(t, fourth[1], "tls.crt"))
	if _, err := served.Verify(x509.VerifyOptions{DNSName: "api.wx.svc", Roots: pool, CurrentTime: now}); err != nil {
		t.Fatalf("the served certificate is not trusted by the new bundle: %v", err)
	}
	old, _ := parseCert(data(t, third[1], "tls.crt"))
	if _, err := old.Verify(x509.VerifyOptions{DNSName: "api.wx.svc", Roots: pool, CurrentTime: now.Add(-19 * time.Hour)}); err != nil {
		t.Fatalf("the previous certificate is not trusted by the new bundle: %v", err)
	}
}

func TestInjectReplacesBrokenSecrets(t *testing.T) {
	objs := testObjects(t)
	live := cluster{}
	first, err := Inject(t.Context(), objs, live.get, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	live.apply(first)
	// A certificate for another name, and a key that does not match: both replaced.
	other := withData(first[1], map[string][]byte{"tls.crt": []byte("garbage"), "tls.key": data(t, first[1], "tls.key")})
	live["wx/"+CertSecretName("api")] = other
	got, err := Inject(t.Context(), objs, live.get, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseCert(data(t, got[1], "tls.crt")); err != nil {
		t.Fatalf("broken certificate not replaced: %v", err)
	}
	live["wx/"+CASecretName("api")] = withData(first[0], map[string][]byte{"ca.crt": data(t, first[0], "ca.crt"), "ca.key": []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")})
	got, err = Inject(t.Context(), objs, live.get, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if string(data(t, got[0], "ca.crt")) == string(data(t, first[0], "ca.crt")) {
		t.Fatal("a CA whose key is broken was kept")
	}
}

func TestInjectRefusesUnknownCA(t *testing.T) {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1.x.example.com", "annotations": map[string]any{AnnotationInjectCA: "ns/missing"}}}}
	_, err := Inject(t.Context(), []*unstructured.Unstructured{o}, cluster{}.get, Policy{})
	if err == nil || !strings.Contains(err.Error(), "ns/missing") {
		t.Fatalf("err = %v", err)
	}
}

// TestRenewAt: what RenewAt says of a live serving Secret is when Inject
// renews it — kept a second before, renewed a second after — for the
// certificate and for the CA; other Secrets have no renewal.
func TestRenewAt(t *testing.T) {
	objs := testObjects(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := Policy{CAValidity: 30 * time.Hour, CertValidity: 3 * time.Hour, Now: func() time.Time { return now }}
	live := cluster{}
	first, err := Inject(t.Context(), objs, live.get, p)
	if err != nil {
		t.Fatal(err)
	}
	live.apply(first)
	for i, key := range map[int]string{0: "ca.crt", 1: "tls.crt"} {
		at, ok := RenewAt(first[i], now)
		if !ok || !at.After(now) {
			t.Fatalf("RenewAt(%s) = %v, %v", first[i].GetName(), at, ok)
		}
		for _, c := range []struct {
			at      time.Time
			renewed bool
		}{{at.Add(-time.Second), false}, {at.Add(time.Second), true}} {
			now = c.at
			got, err := Inject(t.Context(), objs, live.get, p)
			if err != nil {
				t.Fatal(err)
			}
			if renewed := string(data(t, got[i], key)) != string(data(t, first[i], key)); renewed != c.renewed {
				t.Errorf("%s at %v (RenewAt %v): renewed %v, want %v", key, c.at, at, renewed, c.renewed)
			}
		}
		now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	other := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "x"}}}
	if _, ok := RenewAt(other, now); ok {
		t.Error("RenewAt of a Secret that is not a serving one")
	}
	broken := first[1].DeepCopy()
	_ = unstructured.SetNestedField(broken.Object, "", "data", "tls.crt")
	if at, ok := RenewAt(broken, now); !ok || !at.Equal(now) {
		t.Errorf("RenewAt of a certificate Secret without a certificate = %v, %v; want now", at, ok)
	}
}
