package hosts

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeplug/kubeplug/pkg/provider"
)

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestRemovedHostUnreachable: a host removed from the spec that cannot be
// reached is named with the choice of --forget-removed-hosts and kept for the next run;
// with forget (up --forget-removed-hosts) its Node is deleted and it is forgotten.
func TestRemovedHostUnreachable(t *testing.T) {
	keyFile, _ := clientKey(t)
	gone := testHost(t, deadAddr(t), keyFile)
	gone.Node = "workers-1"
	stay := testHost(t, "192.0.2.10:22", keyFile)
	p := &Provider{opts: Options{Parallel: 2, StateDir: t.TempDir(), Events: func(provider.Event) {}, Logger: slog.New(slog.DiscardHandler)},
		keys: &hostKeys{file: filepath.Join(t.TempDir(), "known_hosts"), acceptNew: true}, timeouts: defaultTimeouts}
	// The last run had both hosts; this one's spec only stay.
	p.hosts = []*Host{stay, gone}
	if err := p.writeRecord(nil); err != nil {
		t.Fatal(err)
	}
	p.hosts = []*Host{stay}
	removed, err := p.removedHosts()
	if err != nil || len(removed) != 1 || removed[0].Address != gone.Address || removed[0].Node != "workers-1" || removed[0].KeyFile != keyFile {
		t.Fatalf("removedHosts = %+v, %v; want the host at %s", removed, err, gone.Address)
	}
	kc := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "workers-1"}})
	ctx := context.Background()

	kept, err := p.removeHosts(ctx, kc, removed, false)
	if err == nil || !strings.Contains(err.Error(), gone.Address) || !strings.Contains(err.Error(), "kubeplug up --forget-removed-hosts") || len(kept) != 1 {
		t.Fatalf("unreachable removed host: kept %v, err %v; want it named with --forget-removed-hosts and kept", kept, err)
	}
	if _, err := kc.CoreV1().Nodes().Get(ctx, "workers-1", metav1.GetOptions{}); err != nil {
		t.Errorf("its Node is gone without --forget-removed-hosts: %v", err)
	}
	if err := p.writeRecord(kept); err != nil {
		t.Fatal(err)
	}
	if again, _ := p.removedHosts(); len(again) != 1 {
		t.Errorf("a removed host not cleaned is forgotten by the next run: %v", again)
	}

	kept, err = p.removeHosts(ctx, kc, removed, true)
	if err != nil || len(kept) != 0 {
		t.Fatalf("with --forget-removed-hosts: kept %v, err %v; want it forgotten", kept, err)
	}
	if _, err := kc.CoreV1().Nodes().Get(ctx, "workers-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("with --forget-removed-hosts its Node is still there: %v", err)
	}
}

// TestRenameRefused: a host whose Node name would change (a host before it
// in its pool removed) is refused naming both names, before anything runs.
func TestRenameRefused(t *testing.T) {
	a, b := &Host{Node: "workers-0", Pool: "workers", Address: "192.0.2.11"}, &Host{Node: "workers-1", Pool: "workers", Address: "192.0.2.12"}
	p := &Provider{opts: Options{StateDir: t.TempDir()}, hosts: []*Host{a, b}}
	if err := p.writeRecord(nil); err != nil {
		t.Fatal(err)
	}
	if err := p.checkRenames(); err != nil {
		t.Fatalf("unchanged hosts: %v", err)
	}
	p.hosts = []*Host{{Node: "workers-0", Pool: "workers", Address: "192.0.2.12", Field: "spec.provider.hosts.pools[1].hosts[0]"}}
	err := p.checkRenames()
	if err == nil || !strings.Contains(err.Error(), "spec.provider.hosts.pools[1].hosts[0]: this host is node workers-1 and would become workers-0") {
		t.Errorf("err = %v, want the rename refused", err)
	}
}
