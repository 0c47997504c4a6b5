package render_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider/aws"
	"github.com/kubeplug/kubeplug/pkg/render"
)

var brokenChart = fstest.MapFS{
	"charts/broken/Chart.yaml":          {Data: []byte("apiVersion: v2\nname: broken\nversion: 0.1.0\n")},
	"charts/broken/templates/cm.yaml":   {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  v: {{ required \"host is required\" .Values.host }}\n")},
	"charts/old/Chart.yaml":             {Data: []byte("apiVersion: v2\nname: old\nversion: 0.1.0\nkubeVersion: \"<1.30.0-0\"\n")},
	"charts/old/templates/cm.yaml":      {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")},
	"charts/scalar/Chart.yaml":          {Data: []byte("apiVersion: v2\nname: scalar\nversion: 0.1.0\n")},
	"charts/scalar/templates/list.yaml": {Data: []byte("- a\n- b\n")},
	"charts/cfg/Chart.yaml":             {Data: []byte("apiVersion: v2\nname: cfg\nversion: 0.1.0\n")},
	"charts/cfg/templates/cm.yaml":      {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n")},
}

func TestDiagnostics(t *testing.T) {
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cfg", "namespace": "default"}}
	tests := []struct {
		name    string
		version string
		plugin  string
		c       *model.Contribution
		want    []string // substrings of the one fatal diagnostic's text
	}{{
		name:   "cloud patch path missing",
		plugin: "net",
		c: &model.Contribution{Cloud: &model.Cloud{Patches: []model.Patch{{Ops: []model.PatchOp{
			{Op: "replace", Path: "/Resources/NoSuchRole/Properties/Path", Value: "/"},
		}}}}},
		want: []string{"plugin net", "/Resources/NoSuchRole/Properties/Path", "does not exist", "cloud template"},
	}, {
		name:   "cloud patch test fails",
		plugin: "net",
		c: &model.Contribution{Cloud: &model.Cloud{Patches: []model.Patch{{Ops: []model.PatchOp{
			{Op: "test", Path: "/AWSTemplateFormatVersion", Value: "1999-01-01"},
		}}}}},
		want: []string{"plugin net", "test /AWSTemplateFormatVersion failed"},
	}, {
		name:   "cloud patch replacing a pool's user data",
		plugin: "net",
		c: &model.Contribution{Cloud: &model.Cloud{Patches: []model.Patch{{Ops: []model.PatchOp{
			{Op: "replace", Path: "/Resources/WorkersLaunchTemplate/Properties/LaunchTemplateData/UserData", Value: "IyEvYmluL3No"},
		}}}}},
		want: []string{"plugin net", "cloud.patches[0].ops[0]", "/Resources/WorkersLaunchTemplate/Properties/LaunchTemplateData/UserData", "no plugin may change", "user data"},
	}, {
		name:   "cloud patch replacing a launch template, user data and all",
		plugin: "net",
		c: &model.Contribution{Cloud: &model.Cloud{Patches: []model.Patch{{Ops: []model.PatchOp{
			{Op: "add", Path: "/Resources/WorkersLaunchTemplate/Properties/LaunchTemplateData/InstanceType", Value: "t3.small"},
			{Op: "replace", Path: "/Resources/WorkersLaunchTemplate/Properties/LaunchTemplateData", Value: map[string]any{"UserData": "x"}},
		}}}}},
		want: []string{"plugin net", "cloud.patches[0].ops[1]", "replace /Resources/WorkersLaunchTemplate/Properties/LaunchTemplateData", "/Resources/WorkersLaunchTemplate/Properties/LaunchTemplateData/UserData"},
	}, {
		name:   "cloud patch widening the core's IAM trust",
		plugin: "iam",
		c: &model.Contribution{Cloud: &model.Cloud{Patches: []model.Patch{{Ops: []model.PatchOp{
			{Op: "add", Path: "/Resources/WorkersRole/Properties/AssumeRolePolicyDocument/Statement/-", Value: map[string]any{"Effect": "Allow", "Principal": map[string]any{"AWS": "*"}, "Action": "sts:AssumeRole"}},
		}}}}},
		want: []string{"plugin iam", "/Resources/WorkersRole/Properties/AssumeRolePolicyDocument", "no plugin may change", "trust"},
	}, {
		name:   "cloud patch moving the trust policy away",
		plugin: "iam",
		c: &model.Contribution{Cloud: &model.Cloud{Patches: []model.Patch{{Ops: []model.PatchOp{
			{Op: "move", From: "/Resources/ControlPlaneRole/Properties/AssumeRolePolicyDocument", Path: "/Resources/ControlPlaneRole/Properties/Old"},
		}}}}},
		want: []string{"plugin iam", "/Resources/ControlPlaneRole/Properties/AssumeRolePolicyDocument", "no plugin may change"},
	}, {
		name:   "object patch matches nothing",
		plugin: "mon",
		c: &model.Contribution{Kubernetes: &model.Kubernetes{Patches: []model.ObjectPatch{{
			Target: model.ObjectRef{Kind: "Deployment", Namespace: "kube-system", Name: "coredns"},
			Ops:    []model.PatchOp{{Op: "remove", Path: "/spec/replicas"}},
		}}}},
		want: []string{"plugin mon", "Deployment kube-system/coredns", "matches no object"},
	}, {
		name:   "object patch path missing",
		plugin: "mon",
		c: &model.Contribution{Kubernetes: &model.Kubernetes{
			Objects: []model.Object{{Object: cm}},
			Patches: []model.ObjectPatch{{Target: model.ObjectRef{Kind: "ConfigMap"}, Ops: []model.PatchOp{{Op: "replace", Path: "/data/missing", Value: "x"}}}},
		}},
		want: []string{"plugin mon", "/data/missing", "does not exist", "v1 ConfigMap default/cfg"},
	}, {
		name:   "chart fails to render",
		plugin: "app",
		c:      &model.Contribution{Kubernetes: &model.Kubernetes{HelmReleases: []model.HelmRelease{{Name: "app", Namespace: "app", Chart: "charts/broken"}}}},
		want:   []string{"plugin app", "chart charts/broken", "host is required"},
	}, {
		name:   "chart needs another Kubernetes version",
		plugin: "app",
		c:      &model.Contribution{Kubernetes: &model.Kubernetes{HelmReleases: []model.HelmRelease{{Name: "app", Namespace: "app", Chart: "charts/old"}}}},
		want:   []string{"plugin app", "chart charts/old", "incompatible with Kubernetes v1.37.2"},
	}, {
		name:   "chart renders a non-object",
		plugin: "app",
		c:      &model.Contribution{Kubernetes: &model.Kubernetes{HelmReleases: []model.HelmRelease{{Name: "app", Namespace: "app", Chart: "charts/scalar"}}}},
		want:   []string{"plugin app", "chart charts/scalar", "scalar/templates/list.yaml"},
	}, {
		name:   "chart directory missing",
		plugin: "app",
		c:      &model.Contribution{Kubernetes: &model.Kubernetes{HelmReleases: []model.HelmRelease{{Name: "app", Namespace: "app", Chart: "charts/nope"}}}},
		want:   []string{"plugin app", "chart charts/nope"},
	}, {
		name:   "chart outside the package",
		plugin: "app",
		c:      &model.Contribution{Kubernetes: &model.Kubernetes{HelmReleases: []model.HelmRelease{{Name: "app", Namespace: "app", Chart: "../other/chart"}}}},
		want:   []string{"plugin app", "inside the plugin's package"},
	}, {
		name:   "plugin file on a path kubeplug writes",
		plugin: "tuning",
		c: &model.Contribution{Pools: map[string]*model.Pool{"workers": {Files: map[string]model.File{
			render.KubeletEnvPath: {Content: "KUBELET_ARGS=\n", Mode: "0644"},
		}}}},
		want: []string{render.KubeletEnvPath, "written by both plugin tuning and kubeplug"},
	}, {
		name:   "plugin unit with a reserved name",
		plugin: "tuning",
		c: &model.Contribution{Pools: map[string]*model.Pool{"workers": {Units: map[string]*model.Unit{
			"kubeplug-boot.service": {Content: "[Service]\nExecStart=/usr/bin/true\n"},
		}}}},
		want: []string{"kubeplug-boot.service", "written by both plugin tuning and kubeplug"},
	}, {
		name:   "kubelet flag value with a space",
		plugin: "tuning",
		c: &model.Contribution{Pools: map[string]*model.Pool{"workers": {Kubelet: model.Kubelet{Flags: map[string]model.Setting[string]{
			"system-reserved": {Value: "cpu=1, memory=1Gi"},
		}}}}},
		want: []string{"plugin tuning", "system-reserved", "whitespace"},
	}, {
		name:   "invalid taint effect",
		plugin: "tuning",
		c: &model.Contribution{Pools: map[string]*model.Pool{"workers": {Kubelet: model.Kubelet{Taints: []model.Taint{
			{Key: "dedicated", Effect: "Sometimes"},
		}}}}},
		want: []string{"plugin tuning", "dedicated", "effect must be one of"},
	}, {
		name:   "node labels both ways",
		plugin: "tuning",
		c: &model.Contribution{Pools: map[string]*model.Pool{"workers": {Kubelet: model.Kubelet{
			Flags:  map[string]model.Setting[string]{"node-labels": {Value: "a=b"}},
			Labels: map[string]model.Setting[string]{"c": {Value: "d"}},
		}}}},
		want: []string{"plugin tuning", "node-labels"},
	}, {
		name:   "hook at an unknown phase",
		plugin: "tuning",
		c: &model.Contribution{Pools: map[string]*model.Pool{"workers": {Hooks: []model.Hook{
			{Name: "x", At: "beforeBoot", Command: []string{"/usr/bin/true"}, Behavior: "sync-enforce", Timeout: "1m"},
		}}}},
		want: []string{"plugin tuning", "beforeBoot"},
	}, {
		name:   "file mode not octal",
		plugin: "tuning",
		c: &model.Contribution{Pools: map[string]*model.Pool{"workers": {Files: map[string]model.File{
			"/etc/x": {Content: "x", Mode: "rw-r--r--"},
		}}}},
		want: []string{"plugin tuning", "octal mode"},
	}, {
		name:   "feature gate set both ways differently",
		plugin: "gates",
		c: &model.Contribution{ControlPlane: &model.ControlPlane{
			Components:   map[string]*model.Component{model.KubeScheduler: {Flags: map[string]model.Setting[string]{"feature-gates": {Value: "Foo=false"}}}},
			FeatureGates: map[string]model.Setting[bool]{"Foo": {Value: true}},
		}},
		want: []string{"plugin gates", "feature gate Foo"},
	}, {
		name:   "cloud resource replacing a core one",
		plugin: "net",
		c:      &model.Contribution{Cloud: &model.Cloud{Resources: map[string]model.Setting[any]{"WorkersRole": {Value: map[string]any{}}}}},
		want:   []string{"plugin net", "WorkersRole", "patch"},
	}, {
		name:   "chart renders an object the manifests hold",
		plugin: "app",
		c: &model.Contribution{Kubernetes: &model.Kubernetes{
			Objects:      []model.Object{{Object: cm}},
			HelmReleases: []model.HelmRelease{{Name: "app", Namespace: "default", Chart: "charts/cfg"}},
		}},
		want: []string{"plugin app has v1 ConfigMap default/cfg twice", "from its manifests and from helm release default/app, cfg/templates/cm.yaml"},
	}, {
		name:    "bad Kubernetes version",
		version: "latest",
		want:    []string{"kubernetesVersion", "latest"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := model.New(model.PoolSpec{Name: "workers", Role: model.RoleWorker, Count: 1})
			if d := m.Add(tt.plugin, tt.c); len(d) > 0 {
				t.Fatalf("add: %s", d)
			}
			in := render.Input{
				ClusterName: "t", KubernetesVersion: "1.37.2", Model: m,
				Charts: func(string) fs.FS { return brokenChart },
				Cloud:  aws.Template{},
			}
			if tt.version != "" {
				in.KubernetesVersion = tt.version
			}
			files, diags := render.Files(context.Background(), in)
			if files != nil {
				t.Errorf("a failed render returned %d files", len(files))
			}
			fatal := diags.Fatal()
			if len(fatal) != 1 {
				t.Fatalf("want one fatal diagnostic, got:\n%s", diags)
			}
			got := fatal[0].String()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("diagnostic %q lacks %q", got, w)
				}
			}
			if tt.plugin != "" && fatal[0].Plugin != tt.plugin && !strings.Contains(got, "plugin "+tt.plugin) {
				t.Errorf("diagnostic %q does not name plugin %s", got, tt.plugin)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	dir := filepath.Join(parent, "out", "render")
	want := mustRender(t, fullInput(t))

	if d := render.Write(ctx, fullInput(t), dir); len(d) > 0 {
		t.Fatalf("write: %s", d)
	}
	checkDir(t, dir, want)

	// A second render replaces the first entirely, stray files included.
	writeTemp(t, dir, "stray.txt", []byte("x"))
	if d := render.Write(ctx, fullInput(t), dir); len(d) > 0 {
		t.Fatalf("rewrite: %s", d)
	}
	checkDir(t, dir, want)
	checkNoTemp(t, filepath.Dir(dir))

	// A failing render leaves the previous one as it was.
	bad := fullInput(t)
	bad.KubernetesVersion = "x"
	if d := render.Write(ctx, bad, dir); !d.HasFatal() {
		t.Fatal("want a fatal diagnostic")
	}
	checkDir(t, dir, want)
	checkNoTemp(t, filepath.Dir(dir))

	// A cancelled context leaves it too.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if d := render.Write(cctx, fullInput(t), dir); !d.HasFatal() {
		t.Fatal("want a fatal diagnostic for a cancelled render")
	}
	checkDir(t, dir, want)
	checkNoTemp(t, filepath.Dir(dir))

	// A directory that is not a previous render is never replaced.
	other := filepath.Join(parent, "src")
	writeTemp(t, other, "main.go", []byte("package main\n"))
	d := render.Write(ctx, fullInput(t), other)
	if !d.HasFatal() || !strings.Contains(d.String(), render.MarkerFile) {
		t.Fatalf("want a refusal naming %s, got: %s", render.MarkerFile, d)
	}
	if b, err := os.ReadFile(filepath.Join(other, "main.go")); err != nil || string(b) != "package main\n" {
		t.Fatalf("unrelated directory changed: %q, %v", b, err)
	}
	checkNoTemp(t, parent)
}

func checkDir(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	got := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		got[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got[render.MarkerFile]; !ok {
		t.Errorf("%s lacks %s", dir, render.MarkerFile)
	}
	delete(got, render.MarkerFile)
	if len(got) != len(want) {
		t.Fatalf("%s holds %d files, want %d", dir, len(got), len(want))
	}
	for name, b := range want {
		if string(got[name]) != string(b) {
			t.Errorf("%s/%s differs from the render", dir, name)
		}
	}
}

func checkNoTemp(t *testing.T, parent string) {
	t.Helper()
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("leftover %s in %s", e.Name(), parent)
		}
	}
}
