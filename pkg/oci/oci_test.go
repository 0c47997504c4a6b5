package oci_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/oci"
)

// pkgArchive writes a plugin archive NAME-VERSION.tgz into dir and returns its path.
func pkgArchive(t testing.TB, dir, name, version string) string {
	t.Helper()
	fsys := fstest.MapFS{
		"plugin.yaml": {Data: fmt.Appendf(nil, `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata:
  name: %s
  version: %s
spec:
  contributes:
    kubernetes:
      manifests: [manifests/]
`, name, version), Mode: 0o644},
		"manifests/cm.yaml": {Data: fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n", name), Mode: 0o644},
	}
	var buf bytes.Buffer
	if err := archive.Write(&buf, fsys); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+"-"+version+archive.Ext)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startRegistry runs an in-process registry speaking the distribution API on
// loopback; wrap may intercept requests.
func startRegistry(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	h := registry.New(registry.Logger(nopLogger()))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func newClient(t testing.TB, o oci.Options) *oci.Client {
	t.Helper()
	if o.RegistryConfig == "" && o.Username == "" {
		// Never read the developer's own docker config in tests.
		o.RegistryConfig = filepath.Join(t.TempDir(), "config.json")
	}
	c, err := oci.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPushPull(t *testing.T) {
	host := startRegistry(t, nil)
	dir := t.TempDir()
	file := pkgArchive(t, dir, "demo", "1.2.3")
	c := newClient(t, oci.Options{PlainHTTP: true})
	ctx := context.Background()

	p, err := c.Push(ctx, file, "oci://"+host+"/plugins")
	if err != nil {
		t.Fatal(err)
	}
	if p.Ref != "oci://"+host+"/plugins/demo:1.2.3" || p.Name != "demo" || p.Version != "1.2.3" {
		t.Fatalf("pushed %+v", p)
	}
	// Pushing the same archive again gives the same manifest.
	p2, err := c.Push(ctx, file, "oci://"+host+"/plugins")
	if err != nil {
		t.Fatal(err)
	}
	if p2.Manifest != p.Manifest {
		t.Fatalf("second push gave manifest %s, first %s", p2.Manifest, p.Manifest)
	}

	want, _ := os.ReadFile(file)
	for _, ref := range []string{p.Ref, "oci://" + host + "/plugins/demo@" + p.Manifest} {
		got, err := c.Pull(ctx, ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if !bytes.Equal(got.Archive, want) || got.Digest != p.Digest || got.Manifest != p.Manifest {
			t.Fatalf("%s: pulled %s@%s %s, manifest %s", ref, got.Name, got.Version, got.Digest, got.Manifest)
		}
		out, err := got.WriteArchive(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(out) != "demo-1.2.3.tgz" {
			t.Fatalf("wrote %s", out)
		}
	}
}

func TestPullErrors(t *testing.T) {
	var mode atomic.Value
	mode.Store("")
	var tamperedDigest atomic.Value
	tamperedDigest.Store("")
	host := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch m := mode.Load().(string); m {
			case "401":
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			case "500":
				http.Error(w, `{"errors":[{"code":"UNKNOWN","message":"boom"}]}`, http.StatusInternalServerError)
				return
			case "tamper":
				if d := tamperedDigest.Load().(string); d != "" && strings.HasSuffix(r.URL.Path, "/blobs/"+d) {
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, r)
					b := rec.Body.Bytes()
					if len(b) > 0 {
						b[len(b)/2] ^= 0xff
					}
					for k, v := range rec.Header() {
						w.Header()[k] = v
					}
					w.WriteHeader(rec.Code)
					_, _ = w.Write(b)
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	file := pkgArchive(t, t.TempDir(), "demo", "1.2.3")
	c := newClient(t, oci.Options{PlainHTTP: true})
	ctx := context.Background()
	p, err := c.Push(ctx, file, "oci://"+host+"/plugins")
	if err != nil {
		t.Fatal(err)
	}
	// The layer digest, read from a pull, is the blob to tamper with.
	got, err := c.Pull(ctx, p.Ref)
	if err != nil {
		t.Fatal(err)
	}
	layer := "sha256:" + sha256hex(got.Archive)
	tamperedDigest.Store(layer)

	cases := []struct {
		mode, ref string
		want      []string
	}{
		{"", "oci://" + host + "/plugins/demo:9.9.9", []string{"not found", host}},
		{"", "oci://" + host + "/plugins/demo", []string{"name a version"}},
		{"", "https://" + host + "/plugins/demo:1.2.3", []string{"must start with oci://"}},
		{"401", p.Ref, []string{"401", "--password-stdin", host}},
		{"500", p.Ref, []string{"failed (500", host}},
		{"tamper", p.Ref, []string{"digest mismatch", "expected " + layer, "found sha256:"}},
	}
	for _, tc := range cases {
		t.Run(tc.mode+tc.ref, func(t *testing.T) {
			mode.Store(tc.mode)
			defer mode.Store("")
			_, err := c.Pull(ctx, tc.ref)
			if err == nil {
				t.Fatal("pulled")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}

	t.Run("down", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		down := strings.TrimPrefix(srv.URL, "http://")
		srv.Close()
		_, err := c.Pull(ctx, "oci://"+down+"/plugins/demo:1.2.3")
		if err == nil || !strings.Contains(err.Error(), "cannot reach registry "+down) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestPushRefusesBrokenArchive(t *testing.T) {
	host := startRegistry(t, nil)
	bad := filepath.Join(t.TempDir(), "bad.tgz")
	if err := os.WriteFile(bad, []byte("not a gzip"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, oci.Options{PlainHTTP: true})
	if _, err := c.Push(context.Background(), bad, "oci://"+host+"/plugins"); err == nil || !strings.Contains(err.Error(), "bad.tgz") {
		t.Fatalf("got %v", err)
	}
	if _, err := c.Push(context.Background(), bad, "oci://"+host+"/plugins:1"); err == nil {
		t.Fatal("pushed to a tagged prefix")
	}
}

func TestBasicAuth(t *testing.T) {
	host := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "s3cret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	file := pkgArchive(t, t.TempDir(), "demo", "1.0.0")
	ctx := context.Background()
	if _, err := newClient(t, oci.Options{PlainHTTP: true}).Push(ctx, file, "oci://"+host+"/p"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("anonymous push: %v", err)
	}
	withPw := newClient(t, oci.Options{PlainHTTP: true, Username: "alice", Password: "s3cret"})
	if _, err := withPw.Push(ctx, file, "oci://"+host+"/p"); err != nil {
		t.Fatal(err)
	}
	// The docker config file carries the same credentials.
	cfg := filepath.Join(t.TempDir(), "config.json")
	auth := "YWxpY2U6czNjcmV0" // base64("alice:s3cret")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `{"auths":{%q:{"auth":%q}}}`, host, auth), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := newClient(t, oci.Options{PlainHTTP: true, RegistryConfig: cfg}).Pull(ctx, "oci://"+host+"/p/demo:1.0.0"); err != nil {
		t.Fatal(err)
	}
}

func TestTLSWithCAFile(t *testing.T) {
	srv := httptest.NewTLSServer(registry.New(registry.Logger(nopLogger())))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "https://")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	file := pkgArchive(t, t.TempDir(), "demo", "1.0.0")
	ctx := context.Background()
	if _, err := newClient(t, oci.Options{}).Push(ctx, file, "oci://"+host+"/p"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("push without the CA: %v", err)
	}
	c := newClient(t, oci.Options{CAFiles: []string{ca}})
	if _, err := c.Push(ctx, file, "oci://"+host+"/p"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pull(ctx, "oci://"+host+"/p/demo:1.0.0"); err != nil {
		t.Fatal(err)
	}
	if _, err := oci.New(oci.Options{CAFiles: []string{file}}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("CA file that is no PEM: %v", err)
	}
}

// TestReferrers attaches a blob to a plugin manifest through the referrers API and,
// on a registry without it, through the sha256-HEX tag fallback.
func TestReferrers(t *testing.T) {
	for _, api := range []bool{true, false} {
		t.Run(fmt.Sprintf("api=%v", api), func(t *testing.T) {
			var fallbackTagged, apiServed atomic.Bool
			host := startRegistry(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if strings.Contains(r.URL.Path, "/referrers/") {
						if !api {
							http.NotFound(w, r)
							return
						}
						apiServed.Store(true)
					}
					if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/sha256-") {
						fallbackTagged.Store(true)
					}
					h.ServeHTTP(w, r)
				})
			})
			c := newClient(t, oci.Options{PlainHTTP: true})
			ctx := context.Background()
			p, err := c.Push(ctx, pkgArchive(t, t.TempDir(), "demo", "1.0.0"), "oci://"+host+"/p")
			if err != nil {
				t.Fatal(err)
			}
			const at = "application/vnd.example.signature.v1"
			d, err := c.PushReferrer(ctx, p.Ref, at, "application/octet-stream", []byte("sig"), map[string]string{"who": "me"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.PushReferrer(ctx, p.Ref, "application/vnd.other", "application/octet-stream", []byte("x"), nil); err != nil {
				t.Fatal(err)
			}
			rs, err := c.Referrers(ctx, p.Ref, at)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || rs[0].Digest != d.Digest || rs[0].ArtifactType != at || rs[0].Annotations["who"] != "me" {
				t.Fatalf("referrers %+v, pushed %s", rs, d.Digest)
			}
			all, err := c.Referrers(ctx, p.Ref, "")
			if err != nil || len(all) != 2 {
				t.Fatalf("all referrers %v %v", all, err)
			}
			b, err := c.ReferrerBlob(ctx, p.Ref, rs[0])
			if err != nil || string(b) != "sig" {
				t.Fatalf("blob %q %v", b, err)
			}
			// Without the API the fallback index must have been written; with it the
			// listing must have come from the API (the test registry does not answer
			// OCI-Subject, so the fallback index is written either way).
			if !api && !fallbackTagged.Load() {
				t.Fatal("no referrers API and no sha256-HEX tag pushed")
			}
			if api && !apiServed.Load() {
				t.Fatal("the referrers API was not used")
			}
		})
	}
}

func TestSlowRegistryTimesOut(t *testing.T) {
	release := make(chan struct{})
	host := startRegistry(t, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
	})
	defer close(release)
	c := newClient(t, oci.Options{PlainHTTP: true, Timeout: 100 * time.Millisecond})
	_, err := c.Pull(context.Background(), "oci://"+host+"/p/demo:1.0.0")
	if err == nil || !strings.Contains(err.Error(), "did not answer in time") {
		t.Fatalf("got %v", err)
	}
}
