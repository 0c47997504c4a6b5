package source_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
