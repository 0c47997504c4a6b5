package oci_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kubeplug/kubeplug/pkg/oci"
)

// BenchmarkPull50 pulls 50 packages from a loopback registry one after another and
// concurrently (8 at a time), each pull checking every digest and unpacking the
// package. One op is all 50 pulls. With latency=0 the registry answers at once (the
// bound is CPU, shared by registry and client); latency=5ms delays every answer, as a
// registry across a network does.
func BenchmarkPull50(b *testing.B) {
	for _, lat := range []time.Duration{0, 5 * time.Millisecond} {
		b.Run("latency="+lat.String(), func(b *testing.B) { benchPull50(b, lat) })
	}
}

func benchPull50(b *testing.B, latency time.Duration) {
	host := startRegistry(b, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(latency)
			h.ServeHTTP(w, r)
		})
	})
	c := newClient(b, oci.Options{PlainHTTP: true})
	ctx := context.Background()
	dir := b.TempDir()
	refs := make([]string, 50)
	for i := range refs {
		p, err := c.Push(ctx, pkgArchive(b, dir, fmt.Sprintf("p%02d", i), "1.0.0"), "oci://"+host+"/bench")
		if err != nil {
			b.Fatal(err)
		}
		refs[i] = p.Ref
	}
	b.Run("sequential", func(b *testing.B) {
		for b.Loop() {
			for _, r := range refs {
				if _, err := c.Pull(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("concurrent", func(b *testing.B) {
		for b.Loop() {
			var g errgroup.Group
			g.SetLimit(8)
			for _, r := range refs {
				g.Go(func() error {
					_, err := c.Pull(ctx, r)
					return err
				})
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
