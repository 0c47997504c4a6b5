package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/clusterpki"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
)

// TestCheckVersionChange: the same version or none recorded is no upgrade, a
// higher patch or the next minor is one, a lower version and a skipped minor
// are refused naming what the cluster runs.
func TestCheckVersionChange(t *testing.T) {
	for _, tc := range []struct {
		was, now string
		upgrade  bool
		err      string
	}{
		{was: "", now: "1.37.1"},
		{was: "1.37.1", now: "v1.37.1"},
		{was: "1.36.3", now: "1.37.1", upgrade: true},
		{was: "1.37.0", now: "1.37.1", upgrade: true},
		{was: "1.37.1", now: "1.36.3", err: "cluster c runs Kubernetes 1.37.1; a downgrade is not supported"},
		{was: "1.35.2", now: "1.37.1", err: "cluster c runs Kubernetes 1.35.2; an upgrade moves one minor version at a time (Kubernetes' version skew policy): upgrade to 1.36 first"},
		{was: "1.37.1", now: "2.0.0", err: "upgrade to 1.38 first"},
		{was: "junk", now: "1.37.1", err: `runs Kubernetes "junk", which kubeplug cannot compare`},
	} {
		t.Run(tc.was+"->"+tc.now, func(t *testing.T) {
			upgrade, err := checkVersionChange("c", tc.was, tc.now)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, provider.ErrUnsupportedVersion) {
					t.Fatalf("err = %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || upgrade != tc.upgrade {
				t.Fatalf("checkVersionChange = %v, %v; want %v", upgrade, err, tc.upgrade)
			}
		})
	}
}

// TestReplaceRunningMember rolls three real etcd members one at a time, as
// an upgrade of three control-plane machines does, while a writer puts a key
// every 50 ms through the members: each is replaced only with all three
// healthy, its leadership moved away first, and the writes go on (none that
// succeeded is lost). A member that is down itself is replaced; with another
// member down, a roll is refused naming it.
func TestReplaceRunningMember(t *testing.T) {
	bin, err := controlplane.FindBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var ms []*etcdProc
	var initial []string
	for i := range 3 {
		m := &etcdProc{name: fmt.Sprintf("control-plane-%d", i),
			client: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), peer: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
			dir: filepath.Join(dir, fmt.Sprint(i))}
		ms = append(ms, m)
		initial = append(initial, m.name+"="+m.peer)
	}
	for _, m := range ms {
		m.start(t, bin, strings.Join(initial, ","), "new")
	}
	endpoints := func() []string { return []string{ms[0].client, ms[1].client, ms[2].client} }
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if err := waitMembersHealthy(ctx, endpoints(), 3, time.Minute); err != nil {
		t.Fatal(err)
	}

	// The writer, through every member's client URL as the API servers
	// reach them (each its own; here the client balances).
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	var (
		mu       sync.Mutex
		written  []string
		failures int
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			key := fmt.Sprintf("/w/%05d", i)
			wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := cli.Put(wctx, key, "x")
			wcancel()
			mu.Lock()
			if err == nil {
				written = append(written, key)
			} else {
				failures++
			}
			mu.Unlock()
		}
	}()

	for i := range ms {
		leader := leaderName(ctx, t, endpoints())
		old := ms[i]
		fresh := &etcdProc{name: old.name, client: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
			peer: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), dir: filepath.Join(dir, fmt.Sprintf("%d-new", i))}
		stopped := false
		init, err := replaceRunningMember(ctx, endpoints(), old.name, fresh.peer, func(context.Context) error {
			// The leadership moved off the member before it stops.
			if got := leaderName(ctx, t, endpoints()); got == old.name {
				t.Errorf("%s still leads when it is stopped", old.name)
			}
			old.kill()
			stopped = true
			return os.RemoveAll(old.dir)
		})
		if err != nil || !stopped {
			t.Fatalf("replace %s (leader %s): %v", old.name, leader, err)
		}
		fresh.start(t, bin, init, "existing")
		ms[i] = fresh
		if err := waitMembersHealthy(ctx, endpoints(), 3, time.Minute); err != nil {
			t.Fatalf("after replacing %s: %v", old.name, err)
		}
		cli.SetEndpoints(endpoints()...)
	}
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d keys written while the three members were replaced, %d writes failed", len(written), failures)
	if len(written) == 0 {
		t.Fatal("no write succeeded")
	}
	for _, key := range written {
		resp, err := cli.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("key %s, written during the roll, is lost: %v", key, err)
		}
	}

	// The member replaced is down itself (a replacement that did not come
	// up): replaced again, its removal costs no quorum.
	ms[0].kill()
	fresh := &etcdProc{name: ms[0].name, client: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
		peer: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), dir: filepath.Join(dir, "0-again")}
	init, err := replaceRunningMember(ctx, endpoints(), ms[0].name, fresh.peer, func(context.Context) error { return nil })
	if err != nil {
		t.Fatalf("replace the member that is down: %v", err)
	}
	fresh.start(t, bin, init, "existing")
	ms[0] = fresh
	if err := waitMembersHealthy(ctx, endpoints(), 3, time.Minute); err != nil {
		t.Fatalf("after replacing the member that was down: %v", err)
	}

	// Another member down: the roll does not touch this one.
	ms[2].kill()
	_, err = replaceRunningMember(ctx, endpoints(), ms[0].name, "http://127.0.0.1:1", func(context.Context) error {
		t.Error("stop called with a member down")
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "etcd member control-plane-2 does not answer") || !strings.Contains(err.Error(), "replacing control-plane-0 now could lose etcd's quorum") {
		t.Errorf("a roll with a member down: %v", err)
	}
}

// leaderName is the name of etcd's leader.
func leaderName(ctx context.Context, t *testing.T, endpoints []string) string {
	t.Helper()
	members, err := etcdMembers(ctx, endpoints)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	for _, m := range members {
		if !m.Healthy {
			continue
		}
		st, err := cli.Status(ctx, m.ClientURL)
		if err != nil {
			continue
		}
		for _, o := range members {
			if o.ID == st.Leader {
				return o.Name
			}
		}
	}
	return ""
}

func TestAllHealthy(t *testing.T) {
	ok := []etcdMember{{Name: "a", Healthy: true}, {Name: "b", Healthy: true}, {Name: "c", Healthy: true}}
	if err := allHealthy(ok, 3); err != nil {
		t.Error(err)
	}
	if err := allHealthy(ok[:2], 3); err == nil || err.Error() != "etcd has 2 members, not 3" {
		t.Errorf("two of three listed: %v", err)
	}
	down := []etcdMember{ok[0], {Name: "b"}, {PeerURLs: []string{"https://10.0.0.4:2380"}}}
	if err := allHealthy(down, 3); err == nil || err.Error() != "etcd member b, https://10.0.0.4:2380 does not answer" {
		t.Errorf("two down: %v", err)
	}
}

// TestRestoreThreeMembers: a snapshot restored onto three control-plane
// machines makes each member's data directory in its machine's writable
// layer, with its own name and peer URL and the three-member membership;
// the three etcds started from them (peers over TLS, as on the machines)
// form one cluster with quorum and the snapshot's keys.
func TestRestoreThreeMembers(t *testing.T) {
	bin, err := controlplane.FindBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// A snapshot of a one-member etcd holding a key.
	src := &etcdProc{name: "src", client: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), peer: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), dir: filepath.Join(dir, "src")}
	src.start(t, bin, "src="+src.peer, "new")
	if err := waitMembersHealthy(ctx, []string{src.client}, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{src.client}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/kept", "yes"); err != nil {
		t.Fatal(err)
	}
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "snap.db")
	f, err := os.Create(db)
	if err == nil {
		_, err = io.Copy(f, rc)
		err = errors.Join(err, f.Close(), rc.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = cli.Close()
	src.kill()

	// The provider of a cluster of three control-plane machines on
	// 127.0.0.0/24 (members at .2, .3, .4: loopback addresses).
	state := filepath.Join(dir, "state")
	p, err := New(Options{StateDir: state, ClusterName: "demo", MachinePools: []string{"control-plane"}})
	if err != nil {
		t.Fatal(err)
	}
	p.cpNet = &realnode.Network{ID: "t3", Subnet: "127.0.0.0/24"}
	p.haCount = 3
	members := haMembers(*p.cpNet, 3)
	var ips []net.IP
	for _, m := range members {
		ips = append(ips, m.IP)
	}
	if err := clusterpki.EnsurePKI(p.pkiDir(), net.ParseIP("10.96.0.1"), ips...); err != nil {
		t.Fatal(err)
	}
	if err := clusterpki.EnsureEtcdPeerPKI(p.pkiDir(), ips...); err != nil {
		t.Fatal(err)
	}
	id, err := readIdentity(p.pkiDir())
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(p.machineRoot(ControlPlaneNode), "var", "lib", "etcd")
	if err := p.restoreControlPlane(ctx, &SnapshotHeader{Cluster: "demo", Identity: id}, db, []string{"--data-dir=" + dataDir}); err != nil {
		t.Fatal(err)
	}

	// The three etcds as the machines run them, each from its own layer.
	var endpoints []string
	for _, m := range members {
		data := filepath.Join(p.machineDir(cpName(m.Index)), machineNodeDir, "upper", "var", "lib", "etcd")
		args := []string{"--data-dir=" + data, "--listen-client-urls=" + m.clientURL(), "--advertise-client-urls=" + m.clientURL(),
			"--unsafe-no-fsync=true", "--log-level=error"}
		for _, f := range haEtcdFlags(m, p.cpNet.ID, initialCluster(members), "new") {
			v := f[1]
			if strings.HasPrefix(v, factPKIDir) {
				v = filepath.Join(p.pkiDir(), strings.TrimPrefix(v, factPKIDir))
			}
			args = append(args, "--"+f[0]+"="+v)
		}
		cmd := exec.Command(filepath.Join(bin, "etcd"), args...) //nolint:gosec // the test's own etcd
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		endpoints = append(endpoints, m.clientURL())
	}
	if err := waitMembersHealthy(ctx, endpoints, 3, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := etcdMembers(ctx, endpoints)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range got {
		if m.Name != cpName(i) || len(m.PeerURLs) != 1 || m.PeerURLs[0] != members[i].peerURL() {
			t.Errorf("member %d: %+v", i, m)
		}
	}
	cli, err = clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	resp, err := cli.Get(ctx, "/kept")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "yes" {
		t.Fatalf("the snapshot's key after the restore onto three members: %v %v", resp, err)
	}
	if _, err := cli.Put(ctx, "/after", "x"); err != nil {
		t.Errorf("a write after the restore (quorum): %v", err)
	}
}

// TestDrainRetriesTransientErrors: an eviction that fails because the API
// server timed out (its etcd slow, as while control-plane machines are
// replaced) is tried again; one that is refused for another reason fails
// the drain at once, naming the Pod.
func TestDrainRetriesTransientErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failure error
		wantErr string
	}{
		{"etcd timed out", apierrors.NewInternalError(errors.New("etcdserver: request timed out")), ""},
		// The load balancer closed the connection of an API server it
		// took out (a control-plane machine replaced).
		{"connection closed", &url.Error{Op: "Post", URL: "https://10.250.3.129:6443/api/v1/namespaces/default/pods/web/eviction", Err: io.EOF}, ""},
		{"connection reset", fmt.Errorf("read tcp 10.250.3.1:40000->10.250.3.129:6443: %w", syscall.ECONNRESET), ""},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web", errors.New("no")), "evict default/web: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m-1"}}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "m-1"}}
			client := fake.NewClientset(node, pod)
			calls := 0
			client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "eviction" {
					return false, nil, nil
				}
				calls++
				if calls == 1 {
					return true, nil, tc.failure
				}
				return true, nil, client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "default", "web")
			})
			// The fake ignores field selectors: only m-1's Pod exists.
			err := provider.Drain(t.Context(), client, "m-1", 10*time.Second)
			if tc.wantErr == "" {
				if err != nil || calls != 2 {
					t.Fatalf("drain = %v after %d evictions; want it to try again and succeed", err, calls)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || calls != 1 {
				t.Fatalf("drain = %v after %d evictions; want it to fail at once with %q", err, calls, tc.wantErr)
			}
		})
	}
}
