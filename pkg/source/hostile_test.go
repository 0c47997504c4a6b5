package source_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/sign"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// testNet is an address of TEST-NET-1 (RFC 5737): never routed, and never
// contacted here, since the transport policy refuses it before any dial.
const testNet = "192.0.2.1"

// TestCatalogCredentialsNeverPrinted gives catalog URLs with user:password@ in
// every way they reach a message: a failing index, a refused scheme, a URL that
// does not parse. No message holds the password.
func TestCatalogCredentialsNeverPrinted(t *testing.T) {
	c := newCatalog(t)
	c.fail.Store(401)
	srv := httptest.NewServer(c)
	defer srv.Close()
	withCreds := strings.Replace(srv.URL, "http://", "http://alice:hunter2@", 1) + "/repo/index.yaml"
	_, msg := fetchAll(t, source.HTTPCatalog(source.OriginCatalog, withCreds, source.HTTPOptions{}))
	if strings.Contains(msg, "hunter2") || !strings.Contains(msg, "alice:***@") || !strings.Contains(msg, "401") {
		t.Errorf("diagnostics %q: want the URL with its password masked and the status", msg)
	}
	for _, raw := range []string{
		"http://alice:hunter2@" + testNet + "/index.yaml",   // plain http off loopback
		"ftp://alice:hunter2@example.com/index.yaml",        // not https
		"https://alice:hunter2@exa mple.com/%zz/index.yaml", // does not parse
	} {
		err := source.CheckCatalogURL(raw)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("CheckCatalogURL(%q) = %v; want a refusal without the password", raw, err)
		}
		_, msg := fetchAll(t, source.HTTPCatalog(source.OriginCatalog, raw, source.HTTPOptions{}))
		if msg == "" || strings.Contains(msg, "hunter2") {
			t.Errorf("listing %q: diagnostics %q; want a refusal without the password", raw, msg)
		}
	}
}

// TestCatalogTransportDowngrades serves a catalog on loopback that redirects
// its index, or names its archives, over plain http to another host: both are
// refused by the same policy as the URL the user wrote, naming the URL.
func TestCatalogTransportDowngrades(t *testing.T) {
	c := newCatalog(t)
	mux := http.NewServeMux()
	mux.Handle("/", c)
	mux.HandleFunc("/moved/index.yaml", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+testNet+"/repo/index.yaml", http.StatusFound)
	})
	mux.HandleFunc("/moved-safe/index.yaml", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/repo/index.yaml", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/loop/index.yaml", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop/index.yaml", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	t.Run("redirect off loopback", func(t *testing.T) {
		_, msg := fetchAll(t, source.HTTPCatalog(source.OriginCatalog, srv.URL+"/moved/index.yaml", source.HTTPOptions{}))
		for _, w := range []string{"cannot read the catalog index", "redirected to http://" + testNet + "/repo/index.yaml", "plain http is accepted for loopback addresses only"} {
			if !strings.Contains(msg, w) {
				t.Errorf("diagnostics %q\nlack %q", msg, w)
			}
		}
	})
	t.Run("redirect on loopback", func(t *testing.T) {
		idx, l := source.List(context.Background(), source.HTTPCatalog(source.OriginCatalog, srv.URL+"/moved-safe/index.yaml", source.HTTPOptions{}))
		if len(l) > 0 || len(idx.All()) != 3 {
			t.Errorf("a redirect on loopback: %d versions, diagnostics %q", len(idx.All()), l.String())
		}
	})
	t.Run("redirect loop", func(t *testing.T) {
		_, msg := fetchAll(t, source.HTTPCatalog(source.OriginCatalog, srv.URL+"/loop/index.yaml", source.HTTPOptions{}))
		if !strings.Contains(msg, "stopped after 10 redirects") {
			t.Errorf("diagnostics %q: want the redirects bounded", msg)
		}
	})
	for _, u := range []string{"http://" + testNet + "/b-1.2.0.tgz", "file:///etc/passwd", "ftp://example.com/b.tgz"} {
		t.Run("entry "+u, func(t *testing.T) {
			c.edit = func(x *source.CatalogIndex) { x.Entries["b"][0].URLs = []string{u} }
			defer func() { c.edit = nil }()
			hits := c.hits.Load()
			_, msg := fetchAll(t, source.HTTPCatalog(source.OriginCatalog, srv.URL+"/repo/index.yaml", source.HTTPOptions{}))
			for _, w := range []string{"entries.b[0].urls[0]", "plugin b@1.2.0: archive URL " + u} {
				if !strings.Contains(msg, w) {
					t.Errorf("diagnostics %q\nlack %q", msg, w)
				}
			}
			if c.hits.Load() != hits {
				t.Error("an archive was downloaded")
			}
		})
	}
}

// TestOCICatalogCredentialsNeverPrinted: credentials in an oci:// catalog are
// refused without printing them.
func TestOCICatalogCredentialsNeverPrinted(t *testing.T) {
	raw := "oci://alice:hunter2@127.0.0.1:1/plugins"
	err := source.CheckCatalogURL(raw)
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "credentials do not belong") {
		t.Errorf("CheckCatalogURL = %v; want a refusal without the password", err)
	}
	_, msg := fetchAll(t, source.OCICatalog(source.OriginCatalog, raw, source.HTTPOptions{}))
	if msg == "" || strings.Contains(msg, "hunter2") {
		t.Errorf("diagnostics %q; want a refusal without the password", msg)
	}
}

// TestForgedSignatureReferrers attaches 10,000 forged signature referrers to a
// plugin in a loopback registry: verification tries at most oci.MaxSignatures of
// them and fails saying how many it skipped; with a real signature among them
// (annotated with its key's ID, as kubeplug plugin sign --push does) it passes
// after one fetch.
func TestForgedSignatureReferrers(t *testing.T) {
	const forged = 10_000
	var real atomic.Bool
	var manifestGets atomic.Int32
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/manifests/sha256:") {
			manifestGets.Add(1)
		}
		if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/referrers/") {
			reg.ServeHTTP(w, r)
			return
		}
		// The test registry has no referrers API: the real signature is in the
		// tag schema's fallback index, sha256-HEX.
		repo, dgst, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v2/"), "/referrers/")
		fb := httptest.NewRequest(http.MethodGet, "/v2/"+repo+"/manifests/"+strings.Replace(dgst, ":", "-", 1), nil)
		fb.Header.Set("Accept", ocispec.MediaTypeImageIndex)
		rec := httptest.NewRecorder()
		reg.ServeHTTP(rec, fb)
		var idx ocispec.Index
		_ = json.Unmarshal(rec.Body.Bytes(), &idx)
		if !real.Load() {
			idx.Manifests = nil
		}
		all := make([]ocispec.Descriptor, 0, forged+len(idx.Manifests))
		for i := range forged {
			all = append(all, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: sign.ArtifactType, Digest: digest.Digest(fmt.Sprintf("sha256:%064x", i)), Size: 300})
		}
		idx.SchemaVersion, idx.MediaType, idx.Manifests = 2, ocispec.MediaTypeImageIndex, append(all, idx.Manifests...)
		w.Header().Set("Content-Type", ocispec.MediaTypeImageIndex)
		_ = json.NewEncoder(w).Encode(idx)
	}))
	defer srv.Close()
	c, err := oci.New(oci.Options{PlainHTTP: true, RegistryConfig: filepath.Join(t.TempDir(), "config.json")})
	if err != nil {
		t.Fatal(err)
	}
	prefix := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/catalog"
	p := publish(t, "x", "1.0.0", "{}")
	pushAll(t, c, prefix, p)
	kp, err := sign.GenerateKeyPair(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadSigner(kp.Private, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(t.TempDir(), "k.pub")
	if err := os.WriteFile(pub, kp.Public, 0o644); err != nil {
		t.Fatal(err)
	}
	sig, err := s.Sign(bytes.NewReader(p.data))
	if err != nil {
		t.Fatal(err)
	}
	ref := prefix + "/x:1.0.0"
	if _, err := c.PushReferrer(context.Background(), ref, sign.ArtifactType, sign.MediaType, sig, map[string]string{oci.KeyIDAnnotation: s.KeyID()}); err != nil {
		t.Fatal(err)
	}
	src := func() source.Source {
		return source.Verified(source.OCICatalog(source.OriginCatalog, prefix, source.HTTPOptions{}), "cat", source.TrustPolicy{Keys: []string{pub}, Required: true})
	}

	t.Run("forged only", func(t *testing.T) {
		manifestGets.Store(0)
		_, msg := fetchAll(t, src())
		want := fmt.Sprintf("%d more signatures were not tried: at most %d are (those by a trusted key's ID first), of the %d attached", forged-oci.MaxSignatures, oci.MaxSignatures, forged)
		if !strings.Contains(msg, want) {
			t.Errorf("diagnostics %.2000q\nlack %q", msg, want)
		}
		if len(msg) > 16<<10 {
			t.Errorf("the error is %d bytes long", len(msg))
		}
		// The plugin's manifest (resolve and pull) plus the signatures tried.
		if n := manifestGets.Load(); n > oci.MaxSignatures+8 {
			t.Errorf("%d manifests fetched for %d forged signatures; want at most %d signatures tried", n, forged, oci.MaxSignatures)
		}
	})
	t.Run("one real among them", func(t *testing.T) {
		real.Store(true)
		manifestGets.Store(0)
		pkgs, msg := fetchAll(t, src())
		if msg != "" || len(pkgs) != 1 || pkgs[0] == nil {
			t.Fatalf("diagnostics %.2000q; want the real signature to verify", msg)
		}
		if n := manifestGets.Load(); n > 8 {
			t.Errorf("%d manifests fetched; the signature by the trusted key's ID should be tried first", n)
		}
	})
}

// TestHugeBrokenIndex serves indexes of many broken entries from a loopback
// catalog: past source.MaxIndexEntries the index is refused while it is
// decoded (memory bounded); below it the errors are capped at
// source.MaxIndexErrors and the rest counted.
func TestHugeBrokenIndex(t *testing.T) {
	index := func(n int, yamlForm bool) []byte {
		var b bytes.Buffer
		if yamlForm {
			b.WriteString("apiVersion: kubeplug.dev/v1alpha1\nkind: PluginIndex\nentries:\n  a:\n")
			for range n {
				b.WriteString("  - {version: bad}\n")
			}
			return b.Bytes()
		}
		b.WriteString(`{"apiVersion":"kubeplug.dev/v1alpha1","kind":"PluginIndex","entries":{"a":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"version":"bad"}`)
		}
		b.WriteString("]}}")
		return b.Bytes()
	}
	for _, tc := range []struct {
		name string
		data []byte
		want []string
	}{
		{"a million, JSON", index(1_000_000, false), []string{"cannot decode the catalog index", fmt.Sprintf("catalog index too large: more than %d versions", source.MaxIndexEntries)}},
		{"a million, YAML", index(1_000_000, true), []string{"cannot decode the catalog index", "catalog index too large"}},
		{"a thousand, JSON", index(1000, false), []string{"entries.a[0]", fmt.Sprintf("and 980 more broken entries (1,000 in all; the first %d are shown)", source.MaxIndexErrors)}},
		{"a thousand, YAML", index(1000, true), []string{"entries.a[0]", "and 980 more broken entries"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(tc.data) }))
			defer srv.Close()
			_, l := source.List(context.Background(), source.HTTPCatalog(source.OriginCatalog, srv.URL+"/index.json", source.HTTPOptions{}))
			msg := l.String()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("diagnostics %.1000q\nlack %q", msg, w)
				}
			}
			if len(l) > source.MaxIndexErrors+1 || len(msg) > 16<<10 {
				t.Errorf("%d diagnostics, %d bytes: want at most %d", len(l), len(msg), source.MaxIndexErrors+1)
			}
		})
	}
}
