package grpc_test

import (
	"testing"

	"github.com/kubeplug/kubeplug/pkg/stage"
)

// BenchmarkRun measures the per-stage overhead of the gRPC runtime once the
// plugin process runs: one call on the local socket, JSON both ways. Target: < 1ms.
//
//	go test ./pkg/runtime/grpc -run '^$' -bench . -benchtime 2000x
func BenchmarkRun(b *testing.B) {
	rt := newRuntime(b, "ok", 0)
	req := request(stage.Render)
	if _, err := rt.Run(b.Context(), req); err != nil { // start the process
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := rt.Run(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStart measures starting a plugin process: digest check, exec, the
// go-plugin handshake with AutoMTLS, the SDK version check and a first call.
//
//	go test ./pkg/runtime/grpc -run '^$' -bench Start -benchtime 20x
func BenchmarkStart(b *testing.B) {
	req := request(stage.Render)
	for b.Loop() {
		rt := newRuntime(b, "ok", 0)
		if _, err := rt.Run(b.Context(), req); err != nil {
			b.Fatal(err)
		}
		if err := rt.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
