package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/model"
)

func TestControlPlaneFlags(t *testing.T) {
	root := t.TempDir()
	m := model.New()
	m.ControlPlane.FeatureGates = map[string]model.Setting[bool]{"A": {Value: true}}
	api := m.ControlPlane.Components[model.KubeAPIServer]
	api.Volumes = map[string]model.Volume{
		"logs":     {HostPath: "/var/log/kubernetes", MountPath: "/var/log/kube"},
		"logs-sub": {HostPath: "/srv/audit", MountPath: "/var/log/kube/audit"},
	}
	api.Flags = map[string]model.Setting[string]{
		"audit-log-path":           {Value: "/var/log/kube/api.log"},         // through "logs"
		"audit-webhook-config":     {Value: "/var/log/kube/audit/hook.yaml"}, // the longest mountPath wins
		"audit-policy-file":        {Value: "/etc/kubernetes/policy.yaml"},   // no volume: as it is, under root
		"oidc-issuer-url":          {Value: "https://issuer.example"},        // not a path
		"enable-admission-plugins": {Value: "AlwaysPullImages"},
		"not-clean":                {Value: "/etc/../x"},
		"feature-gates":            {Value: "B=false"},
	}
	f, err := controlPlaneFlags(m, root)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"audit-log-path":           filepath.Join(root, "var/log/kubernetes/api.log"),
		"audit-webhook-config":     filepath.Join(root, "srv/audit/hook.yaml"),
		"audit-policy-file":        filepath.Join(root, "etc/kubernetes/policy.yaml"),
		"oidc-issuer-url":          "https://issuer.example",
		"enable-admission-plugins": "AlwaysPullImages",
		"not-clean":                "/etc/../x",
	}
	if len(f.APIServerFlags) != len(want) {
		t.Errorf("flags = %v", f.APIServerFlags)
	}
	for k, v := range want {
		if f.APIServerFlags[k] != v {
			t.Errorf("%s = %q, want %q", k, f.APIServerFlags[k], v)
		}
	}
	if len(f.FeatureGates) != 2 || !f.FeatureGates["A"] || f.FeatureGates["B"] {
		t.Errorf("gates = %v", f.FeatureGates)
	}
	for _, d := range []string{"var/log/kubernetes", "srv/audit", "etc/kubernetes"} {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || !fi.IsDir() {
			t.Errorf("directory %s under root: %v", d, err)
		}
	}
}

func TestLockKeepsASecondProcessOut(t *testing.T) {
	dir := t.TempDir()
	p1, err := New(Options{ClusterName: "c", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := New(Options{ClusterName: "c", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := p1.lock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.lock(); err == nil || !strings.Contains(err.Error(), "another kubeplug") {
		t.Errorf("second lock = %v", err)
	}
	unlock()
	unlock2, err := p2.lock()
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}
