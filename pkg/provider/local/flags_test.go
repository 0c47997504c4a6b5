package local

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
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
		controlplane.Etcd: nil, // no flags from these plugins; Kubernetes' feature gates are not etcd's
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
	unlock, err := p1.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.lock(context.Background()); err == nil || !strings.Contains(err.Error(), "another kubeplug") {
		t.Errorf("second lock = %v", err)
	}
	unlock()
	unlock2, err := p2.lock(context.Background())
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}

// TestKeepEtcdData: a cluster made before etcd's flags came from the
// control-plane plugin keeps its data; a new one, or one that has data in the
// rendered directory, is left alone.
func TestKeepEtcdData(t *testing.T) {
	tests := []struct {
		name              string
		legacy, dirExists bool
		dirHasData        bool
		wantLink          bool
	}{
		{name: "a new cluster", wantLink: false},
		{name: "a legacy cluster", legacy: true, wantLink: true},
		{name: "a legacy cluster whose rendered directory was just made", legacy: true, dirExists: true, wantLink: true},
		{name: "the rendered directory has data", legacy: true, dirExists: true, dirHasData: true, wantLink: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			legacy := filepath.Join(base, "controlplane", "etcd")
			dir := filepath.Join(base, "machines", "cp", "root", "var", "lib", "etcd")
			if tt.legacy {
				if err := os.MkdirAll(filepath.Join(legacy, "member"), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if tt.dirExists {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tt.dirHasData {
				if err := os.WriteFile(filepath.Join(dir, "own"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 { // twice: the second run changes nothing
				if err := keepEtcdData(legacy, dir); err != nil {
					t.Fatal(err)
				}
			}
			target, err := os.Readlink(dir)
			if got := err == nil && target == legacy; got != tt.wantLink {
				t.Errorf("%s links to %q (%v), want a link to the legacy data: %t", dir, target, err, tt.wantLink)
			}
		})
	}
}
