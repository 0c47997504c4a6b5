package render_test

import (
	"bytes"
	"context"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider/aws"
	"github.com/kubeplug/kubeplug/pkg/render"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const goldenDir = "testdata/golden"

func mustRender(t *testing.T, in render.Input) map[string][]byte {
	t.Helper()
	files, diags := render.Files(context.Background(), in)
	if diags.HasFatal() {
		t.Fatalf("render failed:\n%s", diags)
	}
	if len(diags) > 0 {
		t.Fatalf("unexpected warnings:\n%s", diags)
	}
	return files
}

func TestGolden(t *testing.T) {
	files := mustRender(t, fullInput(t))
	if *update {
		if err := os.RemoveAll(goldenDir); err != nil {
			t.Fatal(err)
		}
		for name, b := range files {
			p := filepath.Join(goldenDir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var golden []string
	err := filepath.WalkDir(goldenDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(goldenDir, p)
		golden = append(golden, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatalf("reading golden files (run go test ./pkg/render -run TestGolden -update to create them): %v", err)
	}
	var got []string
	for name := range files {
		got = append(got, name)
	}
	slices.Sort(got)
	slices.Sort(golden)
	if !slices.Equal(got, golden) {
		t.Fatalf("rendered files differ from the golden files\n got: %s\nwant: %s", strings.Join(got, " "), strings.Join(golden, " "))
	}
	for _, name := range got {
		want, err := os.ReadFile(filepath.Join(goldenDir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(files[name], want) {
			t.Errorf("%s differs from its golden file (rerun with -update and review the diff):\n%s", name, files[name])
		}
	}
}

// TestDeterministic renders two separately built but equal models and compares bytes:
// every map in the model is a fresh Go map with its own iteration order.
func TestDeterministic(t *testing.T) {
	first := mustRender(t, fullInput(t))
	for range 5 {
		again := mustRender(t, fullInput(t))
		if len(again) != len(first) {
			t.Fatalf("render produced %d files, then %d", len(first), len(again))
		}
		for name, b := range first {
			if !bytes.Equal(b, again[name]) {
				t.Fatalf("%s differs between two renders of the same model", name)
			}
		}
	}
}

func TestLayout(t *testing.T) {
	files := mustRender(t, fullInput(t))
	want := []string{
		"cloud/template.json",
		"control-plane/etcd.yaml",
		"control-plane/kube-apiserver.yaml",
		"control-plane/kube-controller-manager.yaml",
		"control-plane/kube-scheduler.yaml",
		"kubernetes/00-cni.yaml",
		"kubernetes/01-dex.yaml",
		"kubernetes/02-monitoring.yaml",
		"nodes/control-plane/cloud-init.yaml",
		"nodes/control-plane/ignition.json",
		"nodes/gpu-nodes/cloud-init.yaml",
		"nodes/gpu-nodes/ignition.json",
		"nodes/workers/cloud-init.yaml",
		"nodes/workers/ignition.json",
		"plan.json",
	}
	var got []string
	for name := range files {
		got = append(got, name)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("files:\n got %q\nwant %q", got, want)
	}
	api := string(files["control-plane/kube-apiserver.yaml"])
	for _, s := range []string{
		"image: registry.k8s.io/kube-apiserver:v1.37.2",
		"--feature-gates=InPlacePodVerticalScaling=false,StructuredAuthenticationConfiguration=true,WatchList=true",
		"priorityClassName: system-node-critical",
		"hostNetwork: true",
	} {
		if !strings.Contains(api, s) {
			t.Errorf("kube-apiserver.yaml lacks %q:\n%s", s, api)
		}
	}
	dex := string(files["kubernetes/01-dex.yaml"])
	for _, s := range []string{"kind: CustomResourceDefinition", "kind: Deployment", "monitored: \"yes\"", "--kube-version=v1.37.2", "dex-migrate"} {
		if !strings.Contains(dex, s) {
			t.Errorf("01-dex.yaml lacks %q:\n%s", s, dex)
		}
	}
	for _, s := range []string{"dex-test", "this would not parse", "Dex is at"} {
		if strings.Contains(dex, s) {
			t.Errorf("01-dex.yaml has %q, which Helm leaves out:\n%s", s, dex)
		}
	}
}

// TestOrderFromModel checks the file order when the input has no resolved order: it
// follows what the model's lists imply (beta's IAM statement comes before alpha's),
// not plugin names.
func TestOrderFromModel(t *testing.T) {
	m := model.New(model.PoolSpec{Name: "workers", Role: model.RoleWorker, Count: 1})
	obj := func(name string) *model.Kubernetes {
		return &model.Kubernetes{Objects: []model.Object{{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}}}
	}
	iam := func(action string) *model.Cloud {
		return &model.Cloud{IAM: map[string][]model.Statement{model.RoleWorker: {{Statement: map[string]any{"Effect": "Allow", "Action": action, "Resource": "*"}}}}}
	}
	for _, c := range []struct {
		plugin string
		c      *model.Contribution
	}{
		{"zeta", &model.Contribution{Kubernetes: obj("zeta"), Cloud: iam("a:A")}},
		{"beta", &model.Contribution{Kubernetes: obj("beta"), Cloud: iam("b:B")}},
		{"alpha", &model.Contribution{Kubernetes: &model.Kubernetes{HelmReleases: []model.HelmRelease{{Name: "dex", Namespace: "dex", Chart: "charts/dex"}}}, Cloud: iam("c:C")}},
	} {
		if d := m.Add(c.plugin, c.c); len(d) > 0 {
			t.Fatal(d)
		}
	}
	files := mustRender(t, render.Input{
		ClusterName: "t", KubernetesVersion: "1.37.2", Model: m,
		Charts: func(string) fs.FS { return dexPackage },
		Cloud:  aws.Template{},
	})
	var got []string
	for name := range files {
		if strings.HasPrefix(name, "kubernetes/") {
			got = append(got, name)
		}
	}
	slices.Sort(got)
	want := []string{"kubernetes/00-zeta.yaml", "kubernetes/01-beta.yaml", "kubernetes/02-alpha.yaml"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
