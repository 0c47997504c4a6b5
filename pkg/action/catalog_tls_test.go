package action_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
)

// TestCatalogCAFile plans from an HTTPS catalog whose certificate only the
// source's caFile trusts: refused without it (the TLS error named), planned
// with it; a caFile that does not exist, or on a dir source, is refused at the
// field.
func TestCatalogCAFile(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx := context.Background()
	work, dist := t.TempDir(), t.TempDir()
	cfg := &action.Config{NoBuiltin: true}
	p := action.NewPackage(cfg)
	p.Output = filepath.Join(dist, "tlsapp-1.0.0.tgz")
	if _, l := p.Run(ctx, writePlugin(t, work, "tlsapp", "1.0.0", `{}`)); l.HasFatal() {
		t.Fatal(l)
	}
	if _, _, l := action.NewCatalogIndex(cfg).Run(ctx, dist); l.HasFatal() {
		t.Fatal(l)
	}
	srv := httptest.NewTLSServer(http.FileServer(http.Dir(dist)))
	defer srv.Close()
	ca := filepath.Join(work, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := func(source string) string {
		t.Helper()
		file := filepath.Join(work, "cluster.yaml")
		doc := fmt.Sprintf("apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: tls}\nspec:\n  kubernetesVersion: 1.37.1\n  plugins:\n    sources:\n      - %s\n    enabled: [{name: tlsapp}]\n", source)
		if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		cl, l := config.Load(file)
		if cl == nil || l.HasFatal() {
			return l.String()
		}
		doc2, l := action.NewPlan(cfg).Run(ctx, cl)
		if l.HasFatal() || doc2 == nil {
			return l.String()
		}
		return ""
	}
	if msg := plan("{catalog: " + srv.URL + "/index.yaml}"); !strings.Contains(msg, "certificate") {
		t.Errorf("a catalog with an untrusted certificate: %q", msg)
	}
	if msg := plan("{catalog: " + srv.URL + "/index.yaml, caFile: ca.pem}"); msg != "" {
		t.Errorf("with caFile: %s", msg)
	}
	if msg := plan("{catalog: " + srv.URL + "/index.yaml, caFile: missing.pem}"); !strings.Contains(msg, "spec.plugins.sources[0].caFile") || !strings.Contains(msg, "missing.pem") {
		t.Errorf("a caFile that does not exist: %q", msg)
	}
	if msg := plan("{dir: .., caFile: ca.pem}"); !strings.Contains(msg, "caFile is for catalog sources") {
		t.Errorf("caFile on a dir source: %q", msg)
	}
	if msg := plan("{catalog: " + srv.URL + "/index.yaml, registryConfig: ca.pem}"); !strings.Contains(msg, "it is for oci:// catalogs") {
		t.Errorf("registryConfig on an https catalog: %q", msg)
	}
}
