package kube_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
)

// TestRetrySaysItRetries: requests to an API server that does not answer are
// retried, and the wait is not silent — one warning, however many requests
// retry at once; the final error counts the tries.
func TestRetrySaysItRetries(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: connection refused
	var logs bytes.Buffer
	c, err := kube.New(&rest.Config{Host: "https://" + addr}, kube.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Retry:  wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, 3)
	for range 3 {
		go func() { errs <- c.Ping(ctx) }()
	}
	for range 3 {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "did not answer after 4 tries") {
			t.Fatalf("Ping of a dead API server: %v", err)
		}
	}
	if n := strings.Count(logs.String(), "the API server does not answer; retrying"); n != 1 {
		t.Fatalf("retry warnings: %d, want 1:\n%s", n, logs.String())
	}
}

// TestRetryKeepsItsTriesAtTheCap: reaching the backoff's cap does not end the
// tries (wait.Backoff's own stepping would), so DefaultRetry's 9 tries last the
// ~20 s an API server takes to restart; a cancelled context ends them at once,
// saying so.
func TestRetryKeepsItsTriesAtTheCap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	var infos []kube.RetryInfo
	c, err := kube.New(&rest.Config{Host: "https://" + addr}, kube.Options{
		Retry:    wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Cap: 20 * time.Millisecond, Steps: 6},
		Retrying: func(ri kube.RetryInfo) { infos = append(infos, ri) },
	})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	err = c.Ping(t.Context())
	if err == nil || !strings.Contains(err.Error(), "did not answer after 6 tries") {
		t.Fatalf("Ping of a dead API server: %v", err)
	}
	if took := time.Since(began); took < 90*time.Millisecond {
		t.Errorf("6 tries 10+20+20+20+20ms apart took %s", took)
	}
	// Told of the first try and the last (at most once a second between), then the end.
	if len(infos) != 3 || infos[0].Attempt != 1 || infos[1].Attempt != 6 || !infos[2].Done || infos[2].Err == nil {
		t.Errorf("Retrying told %+v", infos)
	}

	ctx, cancel := context.WithCancel(t.Context())
	c, _ = kube.New(&rest.Config{Host: "https://" + addr}, kube.Options{Retry: wait.Backoff{Duration: time.Hour, Steps: 3}})
	time.AfterFunc(100*time.Millisecond, cancel)
	if err := c.Ping(ctx); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Ping cancelled while retrying: %v", err)
	}
}

// TestRefusedCredentialsAreNotRetried: an API server that refuses the
// credentials (401 on /version, whose body client-go does not read as a
// Status) answered; the request fails at once, saying so, instead of being
// retried as if the server did not answer.
func TestRefusedCredentialsAreNotRetried(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte("Unauthorized"))
	}))
	defer srv.Close()
	c, err := kube.New(&rest.Config{Host: srv.URL}, kube.Options{Retry: wait.Backoff{Duration: time.Second, Factor: 1, Steps: 9}})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err = c.ServerVersion(t.Context())
	if err == nil || strings.Contains(err.Error(), "did not answer") || !apierrors.IsUnauthorized(err) {
		t.Fatalf("ServerVersion with refused credentials: %v; want an Unauthorized error, not a retry", err)
	}
	if d := time.Since(began); d > 500*time.Millisecond {
		t.Errorf("took %s: retried", d)
	}
}
