package controlplane

import (
	"os"
	"regexp"
	"testing"
)

// TestKubernetesVersion reads the version of the binaries the tests run: the one
// localcluster/go.mod pins.
func TestKubernetesVersion(t *testing.T) {
	gomod, err := os.ReadFile("../../../../localcluster/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes v([0-9][^\s]*)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("localcluster/go.mod requires no k8s.io/kubernetes")
	}
	got, err := KubernetesVersion("")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(m[1]) {
		t.Errorf("KubernetesVersion = %q, want %s (localcluster/go.mod)", got, m[1])
	}
}
