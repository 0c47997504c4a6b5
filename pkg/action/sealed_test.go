package action_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"io"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/deploy/seal"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestNoSensitiveValueInAnyRecord installs a plugin whose sensitive value goes
// into a manifest's Secret and into a Helm chart (its values, a Secret, its
// notes), upgrades it, rolls it back and uninstalls it, and after each step reads
// every Secret and ConfigMap of the cluster — through base64 and gzip, as Helm and
// kubeplug store records — for the value. Only the two Secrets the plugin puts it
// in may hold it, and they must hold it: the rollback re-applied it from records
// that never stored it in clear.
func TestNoSensitiveValueInAnyRecord(t *testing.T) {
	const (
		file     = "testdata/sealed/cluster.yaml"
		password = "Pa55-w0rd-never-stored"
		ns       = "sealed-test"
	)
	cfg := &action.Config{NoBuiltin: true, Env: func(string) (string, bool) { return "", false }}
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	uninstall := func() {
		u := action.NewUninstall(cfg)
		u.Target.RESTConfig = rc
		_, _ = u.Run(context.WithoutCancel(t.Context()), "vault-ish")
	}
	t.Cleanup(uninstall)
	apply := func(replicas string) {
		t.Helper()
		cl := load(t, file)
		cl.Spec.Spec.Plugins.Enabled[0].Values["replicas"] = replicas
		a := action.NewApply(cfg)
		a.Target.RESTConfig = rc
		a.Timeout = time.Minute
		if _, l := a.Run(t.Context(), cl); l.HasFatal() {
			t.Fatal(l)
		}
	}
	// check reads every Secret and ConfigMap and wants the value only where the
	// plugin puts it, and there.
	check := func(step, replicas string) {
		t.Helper()
		secrets, err := cs.CoreV1().Secrets("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		homes := 0
		for _, s := range secrets.Items {
			for k, v := range s.Data {
				if !reveals(v, password) {
					continue
				}
				if s.Namespace == ns && (s.Name == "from-manifest" || s.Name == "from-chart") && k == "password" && string(v) == password {
					homes++
					continue
				}
				t.Errorf("%s: Secret %s/%s (type %s) holds the sensitive value in %q", step, s.Namespace, s.Name, s.Type, k)
			}
			for k, v := range s.Annotations {
				if reveals([]byte(v), password) {
					t.Errorf("%s: Secret %s/%s annotation %s holds the sensitive value", step, s.Namespace, s.Name, k)
				}
			}
		}
		if homes != 2 {
			t.Errorf("%s: the value is in %d of the 2 Secrets the plugin puts it in", step, homes)
		}
		cms, err := cs.CoreV1().ConfigMaps("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cms.Items {
			for k, v := range c.Data {
				if reveals([]byte(v), password) {
					t.Errorf("%s: ConfigMap %s/%s holds the sensitive value in %q", step, c.Namespace, c.Name, k)
				}
			}
			for k, v := range c.BinaryData {
				if reveals(v, password) {
					t.Errorf("%s: ConfigMap %s/%s holds the sensitive value in %q", step, c.Namespace, c.Name, k)
				}
			}
		}
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "chart-settings", metav1.GetOptions{})
		if err != nil || cm.Data["replicas"] != replicas {
			t.Errorf("%s: chart-settings = %v, %v; want replicas %s", step, cm.Data, err, replicas)
		}
		sealed := false
		list, _ := cs.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "owner=helm"})
		for _, s := range list.Items {
			sealed = sealed || reveals(s.Data["release"], seal.Prefix)
		}
		if !sealed {
			t.Errorf("%s: no Helm release record holds a sealed value: the test does not see what it checks", step)
		}
	}

	apply("1")
	check("install", "1")
	apply("2")
	check("upgrade", "2")

	rb := action.NewRollback(cfg)
	rb.Target.RESTConfig = rc
	rb.Timeout = time.Minute
	rb.Revision = 1
	if _, l := rb.Run(t.Context(), "vault-ish"); l.HasFatal() {
		t.Fatal(l)
	}
	check("rollback", "1")

	// The key gone, a record that needs it is an error naming it, not a value lost.
	key, err := cs.CoreV1().Secrets("kubeplug-system").Get(t.Context(), seal.KeySecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Secrets("kubeplug-system").Delete(t.Context(), seal.KeySecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rb.Revision = 2
	_, l := rb.Run(t.Context(), "vault-ish")
	if !l.HasFatal() || !strings.Contains(l.String(), seal.KeySecret) {
		t.Errorf("rollback without the key: %v, want an error naming %s", l, seal.KeySecret)
	}
	key.ResourceVersion, key.UID = "", ""
	if _, err := cs.CoreV1().Secrets("kubeplug-system").Create(t.Context(), key, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	uninstall()
	if _, err := cs.CoreV1().Secrets(ns).Get(t.Context(), "from-chart", metav1.GetOptions{}); err == nil {
		t.Error("the chart's Secret is still there after uninstall")
	}
}

// reveals says whether b, or anything inside it through base64 and gzip (up to
// four layers deep, as Helm stores a release), holds v as is or base64-encoded.
func reveals(b []byte, v string) bool { return revealsDepth(b, v, 4) }

func revealsDepth(b []byte, v string, depth int) bool {
	if bytes.Contains(b, []byte(v)) || bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString([]byte(v)))) {
		return true
	}
	if depth == 0 {
		return false
	}
	if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
		if raw, err := io.ReadAll(zr); err == nil && revealsDepth(raw, v, depth-1) {
			return true
		}
	}
	if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b))); err == nil && len(raw) > 0 && revealsDepth(raw, v, depth-1) {
		return true
	}
	return false
}
