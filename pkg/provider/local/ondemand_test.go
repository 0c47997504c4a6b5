package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/model"
)

// controllerModel is a model whose kubeplug-controller Deployment runs image,
// with a worker pool "real" of count nodes.
func controllerModel(t *testing.T, image string, count int) *model.Model {
	t.Helper()
	m := model.New()
	m.Pools["real"] = &model.Pool{Name: "real", Role: "worker", Count: count}
	m.Kubernetes.Objects = append(m.Kubernetes.Objects, model.Object{By: "kubeplug-controller", Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "kubeplug-controller", "namespace": "kubeplug-system"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "controller", "image": image}},
		}}},
	}})
	return m
}

// TestOnDemandImages: the kubeplug-controller plugin's image is pushed by up
// from the images directory (make controller-image), else from this kubeplug
// when it can run alone in an image; without a real node to run it, or
// without either program, up is refused before anything starts, saying what
// to do.
func TestOnDemandImages(t *testing.T) {
	const img = "ghcr.io/kubeplug/kubeplug:latest"
	built := t.TempDir()
	if err := os.WriteFile(filepath.Join(built, "kubeplug"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	real := &Provider{opts: Options{RealPools: []string{"real"}}}
	simulated := &Provider{}

	// Not run by the model: nothing needed, whatever the nodes.
	if got, err := simulated.onDemandImages(controllerModel(t, "registry.example/other:v1", 1), ""); err != nil || len(got) != 0 {
		t.Errorf("an image of its own: %v, %v; want none", got, err)
	}
	// Only simulated nodes: refused, naming the object and realPools.
	_, err := simulated.onDemandImages(controllerModel(t, img, 1), built)
	if err == nil || !strings.Contains(err.Error(), "Deployment kubeplug-system/kubeplug-controller (plugin kubeplug-controller) runs image "+img) ||
		!strings.Contains(err.Error(), "spec.provider.local.realPools") {
		t.Errorf("simulated nodes only: %v", err)
	}
	// A real pool without nodes is no better.
	if _, err := real.onDemandImages(controllerModel(t, img, 0), built); err == nil {
		t.Error("a real pool of 0 nodes: accepted")
	}
	// Built: from the images directory.
	got, err := real.onDemandImages(controllerModel(t, "ghcr.io/kubeplug/kubeplug", 1), built)
	if err != nil || len(got) != 1 || got[0].Binary != filepath.Join(built, "kubeplug") {
		t.Errorf("built: %+v, %v", got, err)
	}
	// Not built: this kubeplug (the test binary) when static, else what to run.
	got, err = real.onDemandImages(controllerModel(t, img, 1), t.TempDir())
	exe, _ := os.Executable()
	switch {
	case static(exe) == nil:
		if err != nil || len(got) != 1 || got[0].Binary != exe {
			t.Errorf("not built, a static kubeplug: %+v, %v", got, err)
		}
	default:
		if err == nil || !strings.Contains(err.Error(), "make controller-image") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Errorf("not built, a dynamic kubeplug: %v", err)
		}
	}
}

func TestStatic(t *testing.T) {
	if err := static("/bin/sh"); err == nil || !strings.Contains(err.Error(), "linked dynamically") {
		t.Errorf("static(/bin/sh) = %v, want linked dynamically", err)
	}
	if err := static(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("static of a missing file: no error")
	}
}
