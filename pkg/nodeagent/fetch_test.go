package nodeagent_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/nodeagent"
)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// scriptServer serves script at /script.sh over TLS on loopback and counts requests.
func scriptServer(t *testing.T, script string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.URL.Path != "/script.sh" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(script))
	}))
	t.Cleanup(ts.Close)
	return ts, &n
}

func TestURLHookHTTPS(t *testing.T) {
	const script = "#!/bin/sh\necho p/$KUBEPLUG_HOOK >> ran\n"
	ts, requests := scriptServer(t, script)
	tests := []struct {
		name, path, sha string
		status          nodeagent.Status
		reason          string
	}{
		{name: "digest matches", path: "/script.sh", sha: sum(script), status: nodeagent.StatusSucceeded},
		{name: "digest mismatch", path: "/script.sh", sha: sum("something else"), status: nodeagent.StatusFailed, reason: "refusing to run " + ts.URL + "/script.sh: digest mismatch: expected sha256 " + sum("something else") + ", found " + sum(script)},
		{name: "not found", path: "/missing.sh", sha: sum(script), status: nodeagent.StatusFailed, reason: "download " + ts.URL + "/missing.sh: expected 200 OK, found 404 Not Found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			manifest(t, root, hookspec.Hook{Name: "h", Behavior: hookspec.BehaviorSyncBypass, URL: ts.URL + tt.path, SHA256: tt.sha})
			rep, err := newAgent(t, nodeagent.Options{Root: root, HTTPClient: ts.Client()}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
			if err != nil {
				t.Fatal(err)
			}
			res := rep.Hooks[0]
			if res.Status != tt.status || res.Reason != tt.reason {
				t.Errorf("%s %q, expected %s %q", res.Status, res.Reason, tt.status, tt.reason)
			}
			want := ""
			if tt.status == nodeagent.StatusSucceeded {
				want = "p/h"
			}
			if got := ran(t, root); got != want {
				t.Errorf("ran %q, expected %q", got, want)
			}
			// Only a verified script is kept in the cache.
			entries, _ := os.ReadDir(filepath.Join(root, nodeagent.CacheDir))
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if wantCache := map[bool]string{true: sum(script), false: ""}[want != ""]; strings.Join(names, " ") != wantCache {
				t.Errorf("cache holds %v, expected %q", names, wantCache)
			}
		})
	}

	t.Run("cached by digest", func(t *testing.T) {
		root := t.TempDir()
		manifest(t, root,
			hookspec.Hook{Name: "a", URL: ts.URL + "/script.sh", SHA256: sum(script)},
			hookspec.Hook{Name: "b", URL: ts.URL + "/script.sh", SHA256: sum(script)},
		)
		before := requests.Load()
		if _, err := newAgent(t, nodeagent.Options{Root: root, HTTPClient: ts.Client()}).Run(t.Context(), hookspec.PhaseBeforeNodeup); err != nil {
			t.Fatal(err)
		}
		if got := requests.Load() - before; got != 1 {
			t.Errorf("%d downloads for two hooks with one digest, expected 1", got)
		}
		if got := ran(t, root); got != "p/a p/b" {
			t.Errorf("ran %q", got)
		}
	})
}

func TestURLHookUnreachable(t *testing.T) {
	// A server that accepts the request and never answers, like a black-holed route.
	hang := make(chan struct{})
	ts := httptest.NewTLSServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-hang:
		}
	}))
	defer ts.Close()
	defer close(hang)
	root := t.TempDir()
	manifest(t, root, hookspec.Hook{Name: "h", URL: ts.URL + "/script.sh", SHA256: sum("x")})
	start := time.Now()
	rep, err := newAgent(t, nodeagent.Options{Root: root, HTTPClient: ts.Client(), FetchTimeout: 300 * time.Millisecond}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
	var he *nodeagent.HookError
	if !errors.As(err, &he) {
		t.Fatalf("error %v, expected the enforced hook's failure", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s, expected about the fetch timeout", d)
	}
	if r := rep.Hooks[0].Reason; !strings.Contains(r, "download "+ts.URL+"/script.sh: no answer within 300ms") {
		t.Errorf("reason %q", r)
	}
}

func TestURLHookS3(t *testing.T) {
	const script = "echo p/$KUBEPLUG_HOOK >> ran\n"
	backend := s3mem.New()
	if err := backend.CreateBucket("hooks"); err != nil {
		t.Fatal(err)
	}
	if _, err := backend.PutObject("hooks", "node/prep.sh", map[string]string{}, bytes.NewReader([]byte(script)), int64(len(script)), nil); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(gofakes3.New(backend).Server())
	defer ts.Close()
	// The SDK's default configuration, from an environment that never reaches out.
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))

	root := t.TempDir()
	manifest(t, root,
		hookspec.Hook{Name: "prep", Behavior: hookspec.BehaviorSyncBypass, URL: "s3://hooks/node/prep.sh", SHA256: sum(script)},
		hookspec.Hook{Name: "tampered", Behavior: hookspec.BehaviorSyncBypass, URL: "s3://hooks/node/prep.sh", SHA256: sum("other")},
		hookspec.Hook{Name: "missing", Behavior: hookspec.BehaviorSyncBypass, URL: "s3://hooks/node/none.sh", SHA256: sum("never served")},
	)
	rep, err := newAgent(t, nodeagent.Options{Root: root, S3Endpoint: ts.URL}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := statuses(rep), "prep=succeeded tampered=failed missing=failed"; got != want {
		t.Errorf("statuses %s, expected %s", got, want)
	}
	if r := rep.Hooks[1].Reason; !errors.Is(errors.New(r), nodeagent.ErrDigestMismatch) && !strings.Contains(r, "digest mismatch") {
		t.Errorf("tampered: %q", r)
	}
	if r := rep.Hooks[2].Reason; !strings.Contains(r, "download s3://hooks/node/none.sh: get the s3 object") {
		t.Errorf("missing: %q", r)
	}
	if got := ran(t, root); got != "p/prep" {
		t.Errorf("ran %q", got)
	}
}
