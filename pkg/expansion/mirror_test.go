package expansion_test

import (
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/expansion"
)

func TestParseMirror(t *testing.T) {
	tests := []struct {
		in       string
		from, to string
		err      string
	}{
		{in: "registry.k8s.io=127.0.0.1:5000/k8s", from: "registry.k8s.io", to: "127.0.0.1:5000/k8s"},
		{in: "ghcr.io/kubeplug/=mirror.example.com/", from: "ghcr.io/kubeplug", to: "mirror.example.com"},
		{in: "registry.k8s.io", err: "expected FROM=TO"},
		{in: "=127.0.0.1:5000", err: "expected FROM=TO"},
		{in: "registry.k8s.io=", err: "expected FROM=TO"},
		{in: "Not A Registry=127.0.0.1:5000", err: "is not a registry"},
		{in: "docker.io=UPPER CASE", err: "is not a registry or registry/path"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			m, err := expansion.ParseMirror(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseMirror(%q) = %v, %v; want an error with %q", tt.in, m, err, tt.err)
				}
				return
			}
			if err != nil || m.From != tt.from || m.To != tt.to {
				t.Fatalf("ParseMirror(%q) = %+v, %v; want %s=%s", tt.in, m, err, tt.from, tt.to)
			}
		})
	}
}
