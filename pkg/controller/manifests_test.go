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
	if kinds["CustomResourceDefinition"] != 5 || kinds["Deployment"] != 1 || kinds["ServiceAccount"] != 1 || kinds["ClusterRoleBinding"] != 1 || kinds["Namespace"] != 1 {
		t.Errorf("kinds = %v", kinds)
	}
	raw, _ := yaml.Marshal(deployment)
	for _, want := range []string{"image: registry.example/kubeplug:v1", "replicas: 2", "--leader-elect=true", "--leader-elect-namespace=kubeplug-system", "GOMEMLIMIT"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the Deployment lacks %q:\n%s", want, raw)
		}
	}
	if strings.Contains(string(raw), "--shards") {
		t.Errorf("an unsharded Deployment with --shards:\n%s", raw)
	}
}

// TestManifestsShards: --shards N makes the replicas split the fleet instead
// of electing a leader, each named by its Pod in the shard Leases, which are
// in the controller's namespace.
func TestManifestsShards(t *testing.T) {
	b, err := controller.Manifests(controller.ManifestOptions{Namespace: "fleet-ctl", Replicas: 3, Shards: 6})
	if err != nil {
		t.Fatal(err)
	}
	var deployment string
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		if bytes.Contains(doc, []byte("kind: Deployment")) {
			deployment = string(doc)
		}
	}
	for _, want := range []string{"replicas: 3", "--leader-elect=false", "--leader-elect-namespace=fleet-ctl", "--shards=6", "--replica-id=$(POD_NAME)", "name: POD_NAME", "fieldPath: metadata.name"} {
		if !strings.Contains(deployment, want) {
			t.Errorf("the sharded Deployment lacks %q:\n%s", want, deployment)
		}
	}
}

func TestManifestsRefuseHostileOptions(t *testing.T) {
	for _, o := range []controller.ManifestOptions{
		{Namespace: "Evil_NS/../kube-system"},
		{Namespace: "a.b"},
		{Replicas: -5},
		{Shards: -1},
	} {
		if b, err := controller.Manifests(o); err == nil || b != nil {
			t.Errorf("Manifests(%+v) = %d bytes, %v; want a refusal", o, len(b), err)
		}
	}
}
