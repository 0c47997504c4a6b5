package controller_test

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/controller"
)

func TestManifests(t *testing.T) {
	b, err := controller.Manifests(controller.ManifestOptions{Image: "registry.example/kubeplug:v1", Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var deployment map[string]any
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var obj map[string]any
		if err := yaml.Unmarshal(bytes.TrimPrefix(doc, []byte("---\n")), &obj); err != nil {
			t.Fatalf("a document does not parse: %v\n%s", err, doc)
		}
		if obj == nil {
			continue
		}
		kind, _ := obj["kind"].(string)
		kinds[kind]++
		if kind == "Deployment" {
			deployment = obj
		}
	}
	if kinds["CustomResourceDefinition"] != 4 || kinds["Deployment"] != 1 || kinds["ServiceAccount"] != 1 || kinds["ClusterRoleBinding"] != 1 || kinds["Namespace"] != 1 {
		t.Errorf("kinds = %v", kinds)
	}
	raw, _ := yaml.Marshal(deployment)
	for _, want := range []string{"image: registry.example/kubeplug:v1", "replicas: 2", "--leader-elect=true", "GOMEMLIMIT"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the Deployment lacks %q:\n%s", want, raw)
		}
	}
}

func TestManifestsRefuseHostileOptions(t *testing.T) {
	for _, o := range []controller.ManifestOptions{
		{Namespace: "Evil_NS/../kube-system"},
		{Namespace: "a.b"},
		{Replicas: -5},
	} {
		if b, err := controller.Manifests(o); err == nil || b != nil {
			t.Errorf("Manifests(%+v) = %d bytes, %v; want a refusal", o, len(b), err)
		}
	}
}
