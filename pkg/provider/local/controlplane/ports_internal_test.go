package controlplane

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTakenPortIsChosenAgain: another process takes the ports chosen for etcd
// and the API server (in the cluster's port block) before they bind them; both start on new ports, the
// kubeconfig and client name the API server's new one, and the cluster works.
func TestTakenPortIsChosenAgain(t *testing.T) {
	var held []net.Listener
	taken := map[Component]int{}
	portsChosen = func(c *ControlPlane) {
		for _, comp := range []Component{Etcd, APIServer} {
			// The port block holds the ports until each component starts; a
			// process naming one takes it right after.
			if c.block != nil {
				c.block.Hand(c.ports[comp])
			}
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ports[comp])))
			if err != nil {
				t.Errorf("hold %s's port: %v", comp, err)
				continue
			}
			held = append(held, l)
			taken[comp] = c.ports[comp]
		}
	}
	t.Cleanup(func() {
		portsChosen = nil
		for _, l := range held {
			_ = l.Close()
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cp, err := Start(ctx, Options{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatalf("start with its chosen ports taken: %v", err)
	}
	t.Cleanup(func() { _ = cp.Stop(context.Background()) })
	for comp, port := range taken {
		if cp.ports[comp] == port {
			t.Errorf("%s runs on the port another process held (%d)", comp, port)
		}
	}
	if want := "https://127.0.0.1:" + strconv.Itoa(cp.ports[APIServer]); cp.Host() != want {
		t.Errorf("the client talks to %s, want %s", cp.Host(), want)
	}
	if _, err := cp.client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("the cluster on its new ports: %v", err)
	}
}
