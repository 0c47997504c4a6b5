package config_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"

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
		o, _ := cl.ChartOptions(tc.ref)
		ca := ""
		if len(o.CAFiles) == 1 {
			ca = o.CAFiles[0]
		}
		if ca != tc.ca || o.RegistryConfig != tc.registryConfig {
			t.Errorf("%s: CA %q, registry config %q; want %q, %q", tc.ref, ca, o.RegistryConfig, tc.ca, tc.registryConfig)
		}
	}
}

// TestHelmSourceKeyring checks a type: helm source's verify: a readable PGP
// keyring is accepted and lent to its charts, kubeplug keys and an unreadable
// or missing keyring are errors at their field.
func TestHelmSourceKeyring(t *testing.T) {
	dir := t.TempDir()
	e, err := openpgp.NewEntity("charts", "", "charts@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	var ring bytes.Buffer
	if err := e.Serialize(&ring); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ring.gpg"), ring.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "junk.gpg"), []byte("not a keyring"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ verify, want string }{
		{verify: "{keyring: ring.gpg, required: true}"},
		{verify: "{keys: [k.pub]}", want: "spec.plugins.sources[0].verify.keys: a Helm repository's charts are signed by provenance files"},
		{verify: "{required: true}", want: "spec.plugins.sources[0].verify.keyring: expected the PGP keyring"},
		{verify: "{keyring: junk.gpg}", want: "is not a PGP keyring"},
		{verify: "{keyring: none.gpg}", want: "none.gpg"},
	} {
		file := filepath.Join(dir, "cluster.yaml")
		cl, l := config.Parse(file, []byte(`apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: c}
spec:
  kubernetesVersion: 1.33.0
  plugins:
    sources:
      - {catalog: https://charts.example.com, type: helm, verify: `+tc.verify+`}
`))
		switch {
		case tc.want == "" && l.HasFatal():
			t.Errorf("%s: %v", tc.verify, l)
		case tc.want != "" && !strings.Contains(l.String(), tc.want):
			t.Errorf("%s: %v, want %q", tc.verify, l, tc.want)
		case tc.want == "":
			o, _ := cl.ChartOptions(source.ChartRef{Repo: "https://charts.example.com", Chart: "web"})
			if o.Keyring != filepath.Join(dir, "ring.gpg") || !o.ProvenanceRequired {
				t.Errorf("chart options %+v, want the keyring, required", o)
			}
		}
	}
}
