package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// TestChartOptions checks that a chart by reference takes the CA file, registry
// config and keyring of the cluster's catalog source for the same place — the
// same Helm repository (with or without index.yaml and a trailing slash), or an
// oci:// catalog on the same registry — and nothing from another source.
func TestChartOptions(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"ca.pem", "reg.json", "ring.gpg"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "cluster.yaml")
	cl, l := config.Parse(file, []byte(`apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: c}
spec:
  kubernetesVersion: 1.33.0
  plugins:
    sources:
      - {catalog: https://charts.example.com/index.yaml, type: helm, caFile: ca.pem}
      - {catalog: oci://registry.example.com/catalog, registryConfig: reg.json}
`))
	if cl == nil {
		t.Fatal(l)
	}
	for _, tc := range []struct {
		ref                source.ChartRef
		ca, registryConfig string
	}{
		{source.ChartRef{Repo: "https://charts.example.com/", Chart: "web"}, filepath.Join(dir, "ca.pem"), ""},
		{source.ChartRef{Repo: "https://other.example.com", Chart: "web"}, "", ""},
		{source.ChartRef{Chart: "oci://registry.example.com/charts/web"}, "", filepath.Join(dir, "reg.json")},
		{source.ChartRef{Chart: "oci://elsewhere.example.com/charts/web"}, "", ""},
	} {
		o := cl.ChartOptions(tc.ref)
		ca := ""
		if len(o.CAFiles) == 1 {
			ca = o.CAFiles[0]
		}
		if ca != tc.ca || o.RegistryConfig != tc.registryConfig {
			t.Errorf("%s: CA %q, registry config %q; want %q, %q", tc.ref, ca, o.RegistryConfig, tc.ca, tc.registryConfig)
		}
	}
}
