package render

import (
	"bytes"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kubeplug/kubeplug/pkg/model"
)

// Content hands a chart to the deployer as a release, leaves its objects out of the
// manifests, and carries a patch to one of them in the release's post-renderer.
func TestContentSplitsReleasesAndCarriesPatches(t *testing.T) {
	pkg := fstest.MapFS{
		"charts/web/Chart.yaml":        {Data: []byte("apiVersion: v2\nname: web\nversion: 0.1.0\n")},
		"charts/web/templates/cm.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {a: \"1\"}\n")},
		"charts/web/templates/sa.yaml": {Data: []byte("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: web}\n")},
	}
	m := model.New()
	m.Kubernetes.Objects = []model.Object{{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "web"}}, By: "web"}}
	m.Kubernetes.HelmReleases = []model.HelmRelease{{Name: "web", Namespace: "web", Chart: "charts/web", Values: map[string]any{"x": "y"}, By: "web"}}
	m.Kubernetes.Patches = []model.ObjectPatch{{
		Target: model.ObjectRef{Kind: "ConfigMap", Name: "web"},
		Ops:    []model.PatchOp{{Op: "add", Path: "/data/b", Value: "2"}},
		By:     "web",
	}}
	in := Input{ClusterName: "c", KubernetesVersion: "1.37.1", Model: m, Charts: func(string) fs.FS { return pkg }}
	objs, rels, l := Content(t.Context(), in)
	if l.HasFatal() {
		t.Fatal(l)
	}
	if len(objs["web"]) != 1 || objs["web"][0]["kind"] != "Namespace" {
		t.Errorf("manifests = %v, want only the Namespace", objs["web"])
	}
	if len(rels["web"]) != 1 {
		t.Fatalf("releases = %v, want one", rels)
	}
	r := rels["web"][0]
	if r.Chart == nil || r.Chart.Metadata.Name != "web" || r.Values["x"] != "y" {
		t.Errorf("release = %+v", r)
	}
	if r.PostRenderer == nil {
		t.Fatal("a patch to the chart's ConfigMap has no post-renderer")
	}
	out, err := r.PostRenderer.Run(bytes.NewBufferString("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {a: \"1\"}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: web}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, `b: "2"`) || !strings.Contains(s, "kind: ServiceAccount") {
		t.Errorf("post-rendered:\n%s", s)
	}
	// Objects, for kubeplug render, still holds everything.
	all, l := Objects(t.Context(), in)
	if l.HasFatal() || len(all["web"]) != 3 {
		t.Errorf("Objects = %d objects (%v), want 3", len(all["web"]), l)
	}
}
