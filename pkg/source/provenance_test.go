package source_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"helm.sh/helm/v4/pkg/provenance"

	"github.com/kubeplug/kubeplug/pkg/source"
)

// pgpKey makes a signing key and writes its public keyring to dir/NAME.gpg.
func pgpKey(t *testing.T, dir, name string) (*openpgp.Entity, string) {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", name+"@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := e.Serialize(&buf); err != nil {
		t.Fatal(err)
	}
	ring := filepath.Join(dir, name+".gpg")
	if err := os.WriteFile(ring, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return e, ring
}

// TestChartProvenance checks a Helm repository's provenance files under the
// source's keyring, with Helm's own signing: a chart signed by a key of the
// keyring is taken; one signed by another key is refused naming the chart, its
// version, the source and the key; one without a .prov is refused only when the
// source requires one.
func TestChartProvenance(t *testing.T) {
	dir := t.TempDir()
	trusted, ring := pgpKey(t, dir, "trusted")
	other, _ := pgpKey(t, dir, "other")
	chartYAML := "apiVersion: v2\nname: web\nversion: 1.0.0\n"
	tgz := chartTgz(t, map[string]string{"web/Chart.yaml": chartYAML})
	signed := func(e *openpgp.Entity) []byte {
		prov, err := (&provenance.Signatory{Entity: e}).ClearSign(tgz, "web-1.0.0.tgz", []byte(chartYAML))
		if err != nil {
			t.Fatal(err)
		}
		return []byte(prov)
	}
	index := fmt.Sprintf("apiVersion: v1\nentries:\n  web:\n    - {name: web, version: 1.0.0, digest: %q, urls: [web-1.0.0.tgz]}\n", sum(tgz))
	for _, tc := range []struct {
		name     string
		prov     []byte
		required bool
		want     string
	}{
		{name: "trusted", prov: signed(trusted), required: true},
		{name: "another key", prov: signed(other), want: fmt.Sprintf("chart web 1.0.0 from SERVER/index.yaml: its provenance file is signed by key %X, which is not in the keyring %s: refused", other.PrimaryKey.Fingerprint, ring)},
		{name: "none, required", required: true, want: "chart web 1.0.0 from SERVER/index.yaml has no provenance file (web-1.0.0.tgz.prov), and the source requires one signed by a key of " + ring},
		{name: "none, not required"},
		{name: "tampered", prov: bytes.Replace(signed(trusted), []byte("sha256:"), []byte("sha256:00"), 1), want: "chart web 1.0.0 from SERVER/index.yaml: its provenance file does not verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string][]byte{"web-1.0.0.tgz": tgz}
			if tc.prov != nil {
				files["web-1.0.0.tgz.prov"] = tc.prov
			}
			srv := helmServer(t, index, files)
			f := &source.ChartFetcher{Cache: &source.Cache{Dir: t.TempDir()}, Options: func(source.ChartRef) (source.HTTPOptions, string) {
				return source.HTTPOptions{Keyring: ring, ProvenanceRequired: tc.required}, ""
			}}
			_, err := f.Fetch(context.Background(), source.ChartRef{Repo: srv.URL, Chart: "web", Version: "1.x"}, nil)
			want := strings.ReplaceAll(tc.want, "SERVER", srv.URL)
			switch {
			case want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Fatalf("error %v, want %q", err, want)
			}
			// The repository as a type: helm source checks the same.
			src := source.HelmRepository(source.OriginCatalog, srv.URL, source.HTTPOptions{Cache: &source.Cache{Dir: t.TempDir()}, Keyring: ring, ProvenanceRequired: tc.required})
			vs, _ := src.List(context.Background())
			if len(vs) != 1 {
				t.Fatalf("listed %d versions", len(vs))
			}
			_, l := src.Fetch(context.Background(), vs[0])
			if (want == "") == l.HasFatal() || (want != "" && !strings.Contains(l.String(), want)) {
				t.Fatalf("type: helm source: %v, want %q", l, want)
			}
		})
	}
}
