package oci_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/oci"
)

// fakeRegistry answers every manifest request with body (under its own digest,
// so that the client's digest check passes and the decoding is what is tried)
// and every referrers request with body as the listing; blobs are not found.
type fakeRegistry struct {
	mu   sync.Mutex
	body []byte
}

// subject is a manifest the subject of a referrers listing resolves to.
const subject = `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[]}`

func (r *fakeRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	body := r.body
	r.mu.Unlock()
	serve := func(b []byte, mt string) {
		sum := sha256.Sum256(b)
		w.Header().Set("Content-Type", mt)
		w.Header().Set("Docker-Content-Digest", "sha256:"+hex.EncodeToString(sum[:]))
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		if req.Method != http.MethodHead {
			_, _ = w.Write(b)
		}
	}
	switch p := req.URL.Path; {
	case p == "/v2/":
		w.WriteHeader(http.StatusOK)
	case strings.Contains(p, "/manifests/sha256:"):
		serve([]byte(subject), "application/vnd.oci.image.manifest.v1+json")
	case strings.Contains(p, "/manifests/"):
		serve(body, "application/vnd.oci.image.manifest.v1+json")
	case strings.Contains(p, "/referrers/"):
		serve(body, "application/vnd.oci.image.index.v1+json")
	default:
		http.NotFound(w, req)
	}
}

// FuzzRegistryResponses gives the client any manifest, catalog index manifest
// and referrers listing a registry could answer: it never panics or hangs,
// and whatever it accepts is checked (a pull never succeeds without blobs).
func FuzzRegistryResponses(f *testing.F) {
	d := "sha256:" + strings.Repeat("ab", 32)
	for _, s := range []string{
		subject,
		`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.kubeplug.plugin.v1","config":{"mediaType":"application/vnd.kubeplug.plugin.config.v1+json","digest":"` + d + `","size":10},"layers":[{"mediaType":"application/vnd.kubeplug.plugin.package.v1.tar+gzip","digest":"` + d + `","size":9223372036854775807}]}`,
		`{"schemaVersion":2,"artifactType":"application/vnd.kubeplug.catalog.index.v1","layers":[{"mediaType":"application/vnd.kubeplug.catalog.index.v1+json","digest":"` + d + `","size":-1}]}`,
		`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[` + strings.Repeat(`{"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.kubeplug.plugin.signature.v1","digest":"`+d+`","size":1},`, 200) + `{}]}`,
		`{"manifests":[{"digest":"sha256:../../etc/passwd","size":1}]}`,
		`{"layers":null,"config":null}`, `[]`, `null`, ``, `{`, strings.Repeat(`[`, 10000),
	} {
		f.Add([]byte(s), uint8(0))
	}
	reg := &fakeRegistry{}
	srv := httptest.NewServer(reg)
	f.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	c, err := oci.New(oci.Options{PlainHTTP: true, Timeout: 5 * time.Second, RegistryConfig: filepath.Join(f.TempDir(), "config.json")})
	if err != nil {
		f.Fatal(err)
	}
	sum := sha256.Sum256([]byte(subject))
	subjectRef := fmt.Sprintf("oci://%s/p/demo@sha256:%s", host, hex.EncodeToString(sum[:]))
	f.Fuzz(func(t *testing.T, body []byte, which uint8) {
		reg.mu.Lock()
		reg.body = body
		reg.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		switch which % 3 {
		case 0:
			if p, err := c.Pull(ctx, "oci://"+host+"/p/demo:1.0.0"); err == nil {
				t.Fatalf("pulled %+v without any blob", p.Config)
			}
		case 1:
			if data, found, err := c.FetchIndex(ctx, "oci://"+host+"/p"); err == nil && found {
				t.Fatalf("fetched an index of %d bytes without any blob", len(data))
			}
		case 2:
			rs, err := c.Referrers(ctx, subjectRef, "")
			if err == nil && len(rs) > oci.MaxListEntries {
				t.Fatalf("%d referrers listed", len(rs))
			}
		}
	})
}
