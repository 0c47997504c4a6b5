package kube_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

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
