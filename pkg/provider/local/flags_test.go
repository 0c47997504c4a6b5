package local

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/internal/controlplane"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// TestStaticPodArgs: the command lines come from the rendered static Pods, with
// every clean absolute path moved under the machine root, through the volume
// whose mountPath holds it.
func TestStaticPodArgs(t *testing.T) {
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
	m.ControlPlane.Components[model.KubeScheduler].Flags = map[string]model.Setting[string]{"kubeconfig": {Value: "/etc/kubernetes/admin.conf"}}
	machines, diags := render.Machines(t.Context(), render.Input{ClusterName: "t", KubernetesVersion: "1.37.1", Model: m})
	if diags.HasFatal() {
		t.Fatal(diags)
	}
	args, err := staticPodArgs(machines[model.ControlPlanePool], root)
	if err != nil {
		t.Fatal(err)
	}
	want := map[controlplane.Component][]string{
		controlplane.APIServer: {
			"--audit-log-path=" + filepath.Join(root, "var/log/kubernetes/api.log"),
			"--audit-policy-file=" + filepath.Join(root, "etc/kubernetes/policy.yaml"),
			"--audit-webhook-config=" + filepath.Join(root, "srv/audit/hook.yaml"),
			"--enable-admission-plugins=AlwaysPullImages",
			"--feature-gates=A=true,B=false",
			"--not-clean=/etc/../x",
			"--oidc-issuer-url=https://issuer.example",
		},
		controlplane.ControllerManager: {"--feature-gates=A=true"},
		controlplane.Scheduler:         {"--feature-gates=A=true", "--kubeconfig=" + filepath.Join(root, "etc/kubernetes/admin.conf")},
	}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("args = %q\nwant %q", args, want)
	}
	for _, d := range []string{"var/log/kubernetes", "srv/audit", "etc/kubernetes"} {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || !fi.IsDir() {
			t.Errorf("directory %s under root: %v", d, err)
		}
	}
	// A machine without the static Pods cannot run a control plane.
	if _, err := staticPodArgs(machines["workers"], root); err == nil || !strings.Contains(err.Error(), "no static Pod") {
		t.Errorf("args of a machine without static Pods: %v", err)
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
