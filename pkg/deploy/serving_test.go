package deploy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/serving"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

var (
	apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	secretGVR     = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	vwcGVR        = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
)

// servedObjects is a plugin's content for an API served by a Service that has no
// server behind it, and a webhook on ConfigMaps served by the same Service.
func servedObjects(t *testing.T, plugin, ns, group string) []*unstructured.Unstructured {
	content := objs(t, ns, `
apiVersion: v1
kind: ServiceAccount
metadata: {name: api, namespace: NS}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: NS}
spec:
  ports: [{port: 443, targetPort: 8443}]
  selector: {app: nothing-here}
`)
	for _, o := range serving.Objects(plugin,
		[]v1alpha1.ServedAPI{{Group: group, Versions: []string{"v1alpha1"}, Service: v1alpha1.ServiceRef{Namespace: ns, Name: "api"}}},
		[]v1alpha1.Webhook{{Name: "deny." + group, Type: v1alpha1.WebhookValidating, Service: v1alpha1.ServiceRef{Namespace: ns, Name: "api"},
			Rules: []v1alpha1.WebhookRule{{Operations: []string{"CREATE"}, APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}) {
		content = append(content, &unstructured.Unstructured{Object: o})
	}
	return content
}

// TestServedAPIUnavailable applies a plugin whose API has no server: its
// certificates are issued, the APIService carries the CA, and the wait fails
// naming the APIService's own condition — while a dead webhook with kubeplug's
// defaults blocks nothing, and another plugin still applies.
func TestServedAPIUnavailable(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "served")
	group := plugin + ".example.com"
	d := newDeployer(t, deploy.Options{Timeout: 8 * time.Second})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	_, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: servedObjects(t, plugin, ns, group)}})
	if err == nil {
		t.Fatal("an APIService with no server behind it was reported ready")
	}
	if msg := err.Error(); !strings.Contains(msg, "APIService.apiregistration.k8s.io/v1alpha1."+group+" is not Available") || !strings.Contains(msg, "Available=False") {
		t.Fatalf("error does not name the APIService's condition: %v", err)
	}
	api, err := dyn(t).Resource(apiServiceGVR).Get(t.Context(), "v1alpha1."+group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := dyn(t).Resource(secretGVR).Namespace(ns).Get(t.Context(), serving.CASecretName("api"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bundle, _, _ := unstructured.NestedString(api.Object, "spec", "caBundle")
	if want, _, _ := unstructured.NestedString(ca.Object, "data", "bundle.crt"); bundle == "" || bundle != want {
		t.Errorf("APIService caBundle %q is not the CA Secret's bundle", bundle)
	}
	cert, err := dyn(t).Resource(secretGVR).Namespace(ns).Get(t.Context(), serving.CertSecretName("api"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crt, _, _ := unstructured.NestedString(cert.Object, "data", "tls.crt")
	if crt == "" {
		t.Fatal("serving certificate Secret has no certificate")
	}
	// The release record keeps no key material.
	recs, err := dyn(t).Resource(secretGVR).Namespace("kubeplug-system").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs.Items {
		raw, _ := r.MarshalJSON()
		if strings.Contains(string(raw), crt) {
			t.Fatalf("release record Secret %s holds the serving certificate", r.GetName())
		}
	}
	if _, err := dyn(t).Resource(vwcGVR).Get(t.Context(), "kubeplug-"+plugin, metav1.GetOptions{}); err != nil {
		t.Fatalf("webhook configuration: %v", err)
	}

	// A re-apply keeps the certificate: nothing due, nothing changed.
	_, _ = d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: servedObjects(t, plugin, ns, group)}})
	again, err := dyn(t).Resource(secretGVR).Namespace(ns).Get(t.Context(), serving.CertSecretName("api"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c, _, _ := unstructured.NestedString(again.Object, "data", "tls.crt"); c != crt {
		t.Error("a re-apply replaced a fresh serving certificate")
	}

	// The webhook is dead, yet another plugin's ConfigMap applies: Ignore and a short timeout.
	other := unique(t, "other")
	d2 := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d2.Uninstall(context.WithoutCancel(t.Context()), []string{other}, true) })
	cm := objs(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: after-webhook, namespace: NS}\ndata: {a: b}\n")
	if _, err := d2.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: other, Version: "1.0.0", Objects: cm}}); err != nil {
		t.Fatalf("a dead webhook blocked another plugin: %v", err)
	}

	// Uninstall removes the APIService and the webhook before the rest.
	if _, err := d.Uninstall(t.Context(), []string{plugin}, true); err != nil {
		t.Fatal(err)
	}
	if exists(t, apiServiceGVR, "", "v1alpha1."+group) {
		t.Error("APIService left after uninstall")
	}
	if exists(t, secretGVR, ns, serving.CertSecretName("api")) {
		t.Error("serving certificate Secret left after uninstall")
	}
}

// TestServedCertificatesRotate shortens the validity instead of waiting: a
// certificate past two thirds of its lifetime is renewed on the next apply, the
// CA bundle unchanged.
func TestServedCertificatesRotate(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "rotate")
	group := plugin + ".example.com"
	now := time.Now()
	d := newDeployer(t, deploy.Options{Timeout: 3 * time.Second, ServingCerts: serving.Policy{CAValidity: 100 * time.Hour, CertValidity: 3 * time.Hour, Now: func() time.Time { return now }}})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	read := func() (string, string) {
		c, err := dyn(t).Resource(secretGVR).Namespace(ns).Get(t.Context(), serving.CertSecretName("api"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a, err := dyn(t).Resource(apiServiceGVR).Get(t.Context(), "v1alpha1."+group, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		crt, _, _ := unstructured.NestedString(c.Object, "data", "tls.crt")
		b, _, _ := unstructured.NestedString(a.Object, "spec", "caBundle")
		return crt, b
	}
	_, _ = d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: servedObjects(t, plugin, ns, group)}})
	crt1, bundle1 := read()
	now = now.Add(2*time.Hour + time.Minute)
	_, _ = d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: servedObjects(t, plugin, ns, group)}})
	crt2, bundle2 := read()
	if crt2 == crt1 {
		t.Error("certificate not renewed past two thirds of its lifetime")
	}
	if bundle2 != bundle1 {
		t.Error("CA bundle changed when only the certificate was due")
	}
}

// TestServedAPICannotTakeOverAGroup: a plugin's APIService for a group the API
// server serves itself (built in, or by a CRD), or that another plugin serves,
// is refused before anything of the plugin is applied.
func TestServedAPICannotTakeOverAGroup(t *testing.T) {
	ns := testcluster.Namespace(t)
	d := newDeployer(t, deploy.Options{Timeout: 5 * time.Second})
	for _, tc := range []struct{ group, want string }{
		{"apps", "APIService v1.apps: the API server already serves this group version itself"},
		{"apiextensions.k8s.io", "APIService v1.apiextensions.k8s.io: the API server already serves"},
	} {
		plugin := unique(t, "taker")
		objs := servedObjects(t, plugin, ns, tc.group)
		for _, o := range objs {
			if o.GetKind() == "APIService" {
				o.SetName("v1." + tc.group)
				_ = unstructured.SetNestedField(o.Object, "v1", "spec", "version")
			}
		}
		_, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: objs}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("group %s: err = %v, want %q", tc.group, err, tc.want)
		}
		if exists(t, secretGVR, ns, serving.CertSecretName("api")) {
			t.Fatalf("group %s: the plugin was half applied", tc.group)
		}
		_, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true)
	}
	// Another plugin's served group.
	owner, taker := unique(t, "owner"), unique(t, "taker")
	group := owner + ".example.com"
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{owner}, true) })
	_, _ = d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: owner, Version: "1.0.0", Objects: servedObjects(t, owner, ns, group)}})
	_, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: taker, Version: "1.0.0", Objects: servedObjects(t, taker, ns+"x", group)[4:]}})
	if err == nil || !strings.Contains(err.Error(), "plugin "+owner+" already serves this group version") {
		t.Fatalf("err = %v, want one naming plugin %s", err, owner)
	}
}
