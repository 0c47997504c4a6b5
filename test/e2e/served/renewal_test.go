package served

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/controller"
	"github.com/kubeplug/kubeplug/pkg/serving"
	"github.com/kubeplug/kubeplug/sdk/apiserver"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestControllerRenewsServingCerts: kubeplug's controller, installing the
// widgets API from a PluginInstallation with an interval of an hour, renews
// the serving certificate and the CA (lifetimes of 45 s and 2 min here, each
// starting a minute back) before they expire, with no CLI run, and the API
// answers through the kube-apiserver throughout: the renewed CA is in the
// caBundle of the APIService and of the webhook configuration beside the old
// one while both are valid, and the first certificate's expiry passes
// unnoticed by clients.
func TestControllerRenewsServingCerts(t *testing.T) {
	e := newBareEnv(t, "widgets-api")
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	installControllerCRDs(t, e)
	var pkg bytes.Buffer
	subst := e.subst()
	if err := archive.Write(&pkg, fstest.MapFS{
		// A plugin name of its own: the other tests install widgets-api with
		// the CLI, which the controller would not take over.
		"plugin.yaml":           {Data: []byte(subst.Replace(strings.Replace(pluginYAML, "name: widgets-api,", "name: renewal-api,", 1) + renewalWebhookYAML)), Mode: 0o644},
		"manifests/server.yaml": {Data: []byte(subst.Replace(manifestsYAML)), Mode: 0o644},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(e.ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "packages", Namespace: e.ns},
		BinaryData: map[string][]byte{"renewal-api-0.1.0.tgz": pkg.Bytes()},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	c, err := controller.New(rc, controller.Options{
		Logger: testcluster.Logger(t), Action: &action.Config{NoBuiltin: true},
		MetricsAddr: "0", ProbeAddr: "0", WorkDir: t.TempDir(),
		DefaultInterval: time.Hour, LeaseIdle: 200 * time.Millisecond, TargetResync: 2 * time.Second,
		ServingCerts: serving.Policy{CAValidity: 2 * time.Minute, CertValidity: 45 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("controller: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("the controller did not stop within a minute")
		}
	})
	inst := e.dyn.Resource(ctrlv1.GroupVersion.WithResource("plugininstallations")).Namespace(e.ns)
	cat := e.dyn.Resource(ctrlv1.GroupVersion.WithResource("plugincatalogs")).Namespace(e.ns)
	for _, obj := range []struct {
		client interface {
			Create(context.Context, *unstructured.Unstructured, metav1.CreateOptions, ...string) (*unstructured.Unstructured, error)
		}
		text string
	}{
		{cat, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: main}, spec: {sources: [{configMap: packages}]}}`},
		{inst, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: widgets}, spec: {catalogs: [main], interval: 1h, plugins: [{name: renewal-api, version: 0.1.0}]}}`},
	} {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(obj.text), &u.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := obj.client.Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Deleting the installation uninstalls the plugin, while the controller
	// still runs (cleanups run last first), and the server too: an apply the
	// controller has begun waits for the APIService.
	var stop func()
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		_ = inst.Delete(ctx, "widgets", metav1.DeleteOptions{})
		defer func() {
			if stop != nil {
				stop()
			}
		}()
		for range 240 {
			if _, err := inst.Get(ctx, "widgets", metav1.GetOptions{}); err != nil {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Error("the installation was not uninstalled within two minutes")
	})

	crt := e.waitCert("")
	stop = e.serve(e.listen(), apiserver.Options{Resources: []apiserver.Resource{widgetResource}})
	eventually(t, 2*time.Minute, func() error {
		u, err := inst.Get(t.Context(), "widgets", metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("installation not Ready: %v", conds)
	})
	widgets := e.dyn.Resource(schema.GroupVersionResource{Group: e.group, Version: "v1alpha1", Resource: "widgets"}).Namespace(e.ns)
	w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": e.group + "/v1alpha1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1", "namespace": e.ns}, "spec": map[string]any{"size": int64(3)}}}
	if _, err := widgets.Create(t.Context(), w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A client reads the widget through the kube-apiserver every 250 ms.
	var mu sync.Mutex
	var reads int
	var failures []string
	pctx, pcancel := context.WithCancel(t.Context())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pctx.Err() == nil {
			_, err := widgets.Get(pctx, "w1", metav1.GetOptions{})
			mu.Lock()
			reads++
			if err != nil && pctx.Err() == nil {
				failures = append(failures, time.Now().Format(time.TimeOnly)+" "+err.Error())
			}
			mu.Unlock()
			time.Sleep(250 * time.Millisecond)
		}
	}()

	first := parseCert(t, []byte(crt))
	firstCA := caSecret(t, e)
	start := time.Now()
	var renewals int
	var overlap bool
	for renewals < 2 || time.Now().Before(first.NotAfter.Add(5*time.Second)) || !overlap {
		if time.Since(start) > 4*time.Minute {
			t.Fatalf("after 4 minutes: %d certificate renewals, CA bundle of old and new CA seen: %v", renewals, overlap)
		}
		crt = e.waitCert(crt) // as the kubelet updates the mounted Secret
		renewals++
		ca := caSecret(t, e)
		bundle, hook := apiServiceBundle(t, e), webhookBundle(t, e)
		t.Logf("%s: certificate renewed (%d), until %s; CA renewed: %v; caBundle of the APIService %d CA(s), of the webhook %d", time.Since(start).Round(time.Second),
			renewals, parseCert(t, []byte(crt)).NotAfter.Format(time.TimeOnly), ca != firstCA, bundle, hook)
		if ca != firstCA && bundle >= 2 && hook >= 2 {
			overlap = true
		}
	}
	pcancel()
	<-polled
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Errorf("%d of %d reads through the kube-apiserver failed while the controller renewed certificates:\n%s", len(failures), reads, strings.Join(failures, "\n"))
	}
	t.Logf("%d reads, %d certificate renewals, the first certificate expired at %s", reads, renewals, first.NotAfter.Format(time.TimeOnly))
}

// installControllerCRDs applies kubeplug's controller CRDs and waits until
// they serve.
func installControllerCRDs(t *testing.T, e *env) {
	t.Helper()
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	force := true
	for _, raw := range ctrlv1.CRDs() {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(u.Object)
		if _, err := e.dyn.Resource(crds).Patch(t.Context(), u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "served-test", Force: &force}); err != nil {
			t.Fatalf("apply CRD %s: %v", u.GetName(), err)
		}
	}
	eventually(t, 30*time.Second, func() error {
		_, err := e.dyn.Resource(ctrlv1.GroupVersion.WithResource("plugininstallations")).Namespace(e.ns).List(t.Context(), metav1.ListOptions{})
		return err
	})
}

// caSecret is the serving CA's certificate (PEM).
func caSecret(t *testing.T, e *env) string {
	t.Helper()
	s, err := testcluster.Client(t).CoreV1().Secrets(e.ns).Get(t.Context(), serving.CASecretName(e.plugin), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(s.Data["ca.crt"])
}

// renewalWebhookYAML adds to the plugin a webhook on a resource no one
// writes, for its configuration's caBundle.
const renewalWebhookYAML = `      webhooks:
        - name: renewal.GROUP
          type: validating
          service: {namespace: NS, name: widgets-api, port: PORT}
          path: /never
          rules: [{operations: [CREATE], apiGroups: [GROUP], apiVersions: [v1alpha1], resources: [gadgets]}]
`

// apiServiceBundle counts the CAs in the APIService's caBundle.
func apiServiceBundle(t *testing.T, e *env) int {
	t.Helper()
	a, err := e.dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}).Get(t.Context(), "v1alpha1."+e.group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b64, _, _ := unstructured.NestedString(a.Object, "spec", "caBundle")
	return countPEM(b64)
}

// webhookBundle counts the CAs in the caBundle of the plugin's validating
// webhook.
func webhookBundle(t *testing.T, e *env) int {
	t.Helper()
	w, err := e.dyn.Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}).Get(t.Context(), "kubeplug-renewal-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hooks, _, _ := unstructured.NestedSlice(w.Object, "webhooks")
	if len(hooks) != 1 {
		t.Fatalf("webhooks: %v", hooks)
	}
	b64, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "clientConfig", "caBundle")
	return countPEM(b64)
}

func countPEM(b64 string) int {
	raw, _ := base64.StdEncoding.DecodeString(b64)
	n := 0
	for {
		var blk *pem.Block
		if blk, raw = pem.Decode(raw); blk == nil {
			return n
		}
		n++
	}
}

func parseCert(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(p)
	if blk == nil {
		t.Fatal("no PEM certificate")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
