package source_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/source"
)

// TestURLFiles: a node file from a URL is downloaded once, checked against its
// pinned digest (a mismatch names the URL and both digests), bounded in size
// and time, and served from the cache without the network afterwards.
func TestURLFiles(t *testing.T) {
	body := []byte("#!/bin/sh\necho agent 1.0\n")
	s := sha256.Sum256(body)
	sum := hex.EncodeToString(s[:])
	other := strings.Repeat("0", 64)
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		switch r.URL.Path {
		case "/agent":
			_, _ = w.Write(body)
		case "/big":
			_, _ = w.Write(make([]byte, 2048))
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	u := &source.URLFiles{Dir: t.TempDir(), MaxSize: 1024, Timeout: 200 * time.Millisecond}

	b, err := u.Get(ctx, srv.URL+"/agent", sum)
	if err != nil || string(b) != string(body) {
		t.Fatalf("Get = %q, %v", b, err)
	}

	_, err = u.Get(ctx, srv.URL+"/agent", other)
	want := srv.URL + "/agent: downloaded 25 bytes with sha256 " + sum + ", but the plugin pins sha256 " + other
	if err == nil || err.Error() != want {
		t.Errorf("wrong digest: %v\nwant %s", err, want)
	}

	for path, want := range map[string]string{
		"/big":  "larger than the 1 KiB limit",
		"/slow": "200ms",
		"/nope": "404 Not Found",
	} {
		if _, err := u.Get(ctx, srv.URL+path, other); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), srv.URL+path) {
			t.Errorf("%s: error %v, want it to name the URL and say %q", path, err, want)
		}
	}

	// Offline: the cached file is served without a request.
	srv.Close()
	before := requests
	if b, err := u.Get(ctx, srv.URL+"/agent", sum); err != nil || string(b) != string(body) || requests != before {
		t.Errorf("from the cache: %q, %v, %d requests", b, err, requests-before)
	}
}
