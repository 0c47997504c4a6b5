package realnode

import (
	"errors"
	"strings"
	"testing"
)

// TestPreflightNamesWhatIsMissing: a machine without the programs gets one error
// naming each missing piece and saying simulated pools still work.
func TestPreflightNamesWhatIsMissing(t *testing.T) {
	bins := Bins{Kubelet: "/nonexistent/kubelet", KubeProxy: "/nonexistent/kube-proxy", Containerd: "/nonexistent/containerd",
		Runc: "/nonexistent/runc", CNI: "/nonexistent/cni"}
	err := Preflight(bins, "/nonexistent/kubeplug-registry")
	if !errors.Is(err, ErrCannotHost) {
		t.Fatalf("err = %v, want ErrCannotHost", err)
	}
	for _, want := range []string{"kubelet at /nonexistent/kubelet", "containerd (make localnode) at /nonexistent/containerd",
		"runc (make node-deps) at /nonexistent/runc", "the CNI plugin bridge in /nonexistent/cni", "simulated pools still work"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
