package oci_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/oci"
)

// TestListingsAreBounded serves a registry whose referrers and tags listings
// answer every page with `Link: rel=next` pointing back to the same page: each
// listing stops after MaxListPages requests with an error saying so, instead of
// paging until memory runs out.
func TestListingsAreBounded(t *testing.T) {
	var pages atomic.Int32
	host := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case strings.Contains(r.URL.Path, "/referrers/"):
				pages.Add(1)
				w.Header().Set("Content-Type", "application/vnd.oci.image.index.v1+json")
				w.Header().Set("Link", fmt.Sprintf("<%s?n=1>; rel=\"next\"", r.URL.Path))
				fmt.Fprintf(w, `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.x","digest":"sha256:%064d","size":1}]}`, 1)
			case strings.HasSuffix(r.URL.Path, "/tags/list"):
				pages.Add(1)
				w.Header().Set("Link", fmt.Sprintf("<%s?n=1&last=x>; rel=\"next\"", r.URL.Path))
				fmt.Fprint(w, `{"name":"p/demo","tags":["1.0.0"]}`)
			default:
				h.ServeHTTP(w, r)
			}
		})
	})
	c := newClient(t, oci.Options{PlainHTTP: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := c.Push(ctx, pkgArchive(t, t.TempDir(), "demo", "1.0.0"), "oci://"+host+"/p")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		list func() error
	}{
		{"referrers", func() error { _, err := c.Referrers(ctx, p.Ref, ""); return err }},
		{"tags", func() error { _, err := c.Tags(ctx, "oci://"+host+"/p/demo"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pages.Store(0)
			err := tc.list()
			if !errors.Is(err, oci.ErrListTooLong) || !strings.Contains(err.Error(), fmt.Sprintf("more than %d pages", oci.MaxListPages)) {
				t.Fatalf("err = %v; want the listing bounded", err)
			}
			if n := pages.Load(); n > oci.MaxListPages+1 {
				t.Errorf("%d pages requested, more than %d", n, oci.MaxListPages+1)
			}
		})
	}
}
