package helm_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"os"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/internal/redact"
	"github.com/kubeplug/kubeplug/pkg/deploy/helm"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/seal"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Run(m)) }

// tlsChart generates a CA, a certificate it signs and a password into a
// Secret, as metrics-server's tls.type: helm does, beside a ConfigMap holding
// .Values.message.
func tlsChart(t testing.TB) *chartv2.Chart {
	t.Helper()
	c, err := loader.LoadFiles([]*archive.BufferedFile{
		{Name: "Chart.yaml", Data: []byte("apiVersion: v2\nname: tls\nversion: 0.1.0\n")},
		{Name: "values.yaml", Data: []byte("message: hello\ncn: tls-ca\n")},
		{Name: "templates/cm.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: msg}
data: {message: {{ .Values.message | quote }}}
`)},
		{Name: "templates/secret.yaml", Data: []byte(`{{- $ca := genCA .Values.cn 365 }}
{{- $cert := genSignedCert "tls.svc" (list "127.0.0.1") (list "tls.svc") 365 $ca }}
apiVersion: v1
kind: Secret
metadata: {name: tls-certs}
data:
  ca.crt: {{ $ca.Cert | b64enc }}
  tls.crt: {{ $cert.Cert | b64enc }}
  tls.key: {{ $cert.Key | b64enc }}
  password: {{ randAlphaNum 24 | b64enc }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: indented}
data:
  key: |
    {{- $cert.Key | nindent 4 }}
`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// manager is a Manager as one kubeplug run has it: a fresh set of sensitive
// values and a Sealer whose key is in ns.
func manager(t testing.TB, ns string) (*helm.Manager, *redact.Secrets) {
	t.Helper()
	kc, err := kube.New(testcluster.RESTConfig(t), kube.Options{Logger: testcluster.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	sensitive := redact.New()
	sealer := seal.New(seal.SecretKeys(kc, ns), sensitive, "Secret "+ns+"/"+seal.KeySecret)
	return helm.New(kc, helm.Options{Sealer: sealer, Logger: testcluster.Logger(t)}), sensitive
}

// TestGeneratedKeysStayAcrossUpgrades: an upgrade for an unrelated value
// change, by another run, leaves the generated CA, certificate and password as
// they are; the key is in no record in clear; uninstall removes the record.
func TestGeneratedKeysStayAcrossUpgrades(t *testing.T) {
	ns := testcluster.Namespace(t)
	cs := testcluster.Client(t)
	ctx := t.Context()
	chart := tlsChart(t)
	install := func(values map[string]any) map[string][]byte {
		t.Helper()
		m, _ := manager(t, ns) // each install is another kubeplug run
		done, err := m.Install(ctx, "tls", helm.Release{Name: "tls", Namespace: ns, Chart: chart, Values: values})
		if err != nil {
			t.Fatal(err)
		}
		if done.Revision() == 0 {
			t.Fatal("no revision")
		}
		sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "tls-certs", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sec.Data
	}

	first := install(map[string]any{"message": "one"})
	key := string(first["tls.key"])
	if !strings.Contains(key, "PRIVATE KEY") {
		t.Fatalf("tls.key is not a key: %q", key)
	}
	second := install(map[string]any{"message": "two"})
	for field := range first {
		if !bytes.Equal(first[field], second[field]) {
			t.Errorf("an upgrade for an unrelated value changed the generated Secret's %s", field)
		}
	}
	if len(first) != len(second) {
		t.Errorf("an upgrade for an unrelated value changed the generated Secret's fields: %d, then %d", len(first), len(second))
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "msg", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["message"] != "two" {
		t.Fatalf("the upgrade did not happen: message %q", cm.Data["message"])
	}

	// The key is in no Secret of the namespace in clear but the chart's own:
	// not in Helm's release records, not in the generated record.
	keyLine := strings.Split(strings.TrimSpace(key), "\n")[1]
	secrets, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sawRecord bool
	for _, s := range secrets.Items {
		if s.Name == "tls-certs" {
			continue
		}
		sawRecord = sawRecord || s.Name == helm.GeneratedSecretPrefix+"tls"
		for field, v := range s.Data {
			text := string(v)
			if s.Type == "helm.sh/release.v1" {
				text = helmRecord(t, v)
			}
			if strings.Contains(text, keyLine) || strings.Contains(text, base64.StdEncoding.EncodeToString([]byte(key))) {
				t.Errorf("Secret %s (%s) holds the generated key in clear", s.Name, field)
			}
		}
	}
	if !sawRecord {
		t.Fatalf("no Secret %s", helm.GeneratedSecretPrefix+"tls")
	}

	// Arguments that change (another CN) generate another CA.
	third := install(map[string]any{"message": "two", "cn": "other-ca"})
	if bytes.Equal(third["ca.crt"], first["ca.crt"]) || bytes.Equal(third["tls.key"], first["tls.key"]) {
		t.Error("another CN kept the old CA")
	}
	if !bytes.Equal(third["password"], first["password"]) {
		t.Error("another CN changed the password")
	}

	m, _ := manager(t, ns)
	if err := m.Uninstall(ctx, kube.ReleaseRef{Namespace: ns, Name: "tls"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Get(ctx, helm.GeneratedSecretPrefix+"tls", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the generated record outlived its release: %v", err)
	}

	// With the seal key gone the record cannot be opened: the upgrade fails
	// saying so, and the generated Secret is left as it was.
	before := install(map[string]any{"message": "one"})
	if err := cs.CoreV1().Secrets(ns).Delete(ctx, seal.KeySecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	m, _ = manager(t, ns)
	_, err = m.Install(ctx, "tls", helm.Release{Name: "tls", Namespace: ns, Chart: chart, Values: map[string]any{"message": "two"}})
	if err == nil || !strings.Contains(err.Error(), "Secret "+ns+"/"+seal.KeySecret+" is missing") {
		t.Fatalf("upgrade without the seal key: %v", err)
	}
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "tls-certs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for field := range before {
		if !bytes.Equal(before[field], sec.Data[field]) {
			t.Errorf("a failed upgrade changed the generated Secret's %s", field)
		}
	}
}

// helmRecord decodes a Helm release Secret's data: base64 of gzipped JSON.
func helmRecord(t testing.TB, v []byte) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(string(v))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return string(raw)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
