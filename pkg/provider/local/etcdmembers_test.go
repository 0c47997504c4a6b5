package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
)

// etcdProc is one member of a test's etcd cluster, run by the local control
// plane's etcd.
type etcdProc struct {
	name, client, peer, dir string
	cmd                     *exec.Cmd
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

func (e *etcdProc) start(t *testing.T, bin, initial, state string) {
	t.Helper()
	e.cmd = exec.Command(filepath.Join(bin, "etcd"), "--name="+e.name, "--data-dir="+e.dir, //nolint:gosec // the test's own etcd
		"--listen-client-urls="+e.client, "--advertise-client-urls="+e.client,
		"--listen-peer-urls="+e.peer, "--initial-advertise-peer-urls="+e.peer,
		"--initial-cluster="+initial, "--initial-cluster-state="+state, "--initial-cluster-token=test",
		"--unsafe-no-fsync=true", "--log-level=error")
	e.cmd.Stdout, e.cmd.Stderr = os.Stderr, os.Stderr
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd := e.cmd
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

func (e *etcdProc) kill() { _ = e.cmd.Process.Kill(); _ = e.cmd.Wait() }

// A member lost out of three is replaced through the two others: removed,
// a new one added and started with the cluster's membership, three healthy
// members again. Two lost out of three: quorum is lost, and the error says so
// and what to do.
func TestReplaceEtcdMember(t *testing.T) {
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
	endpoints := []string{ms[0].client, ms[1].client, ms[2].client}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	waitMembers := func(healthy int) []etcdMember {
		t.Helper()
		var members []etcdMember
		var err error
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			members, err = etcdMembers(ctx, endpoints)
			n := 0
			for _, m := range members {
				if m.Healthy {
					n++
				}
			}
			if n == healthy && len(members) == 3 {
				return members
			}
		}
		t.Fatalf("want %d healthy members of 3: %+v, %v", healthy, members, err)
		return nil
	}
	waitMembers(3)

	// control-plane-1 dies with its data (its machine is replaced).
	ms[1].kill()
	_ = os.RemoveAll(ms[1].dir)
	members := waitMembers(2)
	if err := quorum(members); err != nil {
		t.Fatalf("2 of 3 is quorum: %v", err)
	}
	ms[1].peer = fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	ms[1].client = fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	initialNew, err := replaceEtcdMember(ctx, endpoints, ms[1].name, ms[1].peer)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(initialNew, ms[1].name+"="+ms[1].peer) || strings.Count(initialNew, "=") != 3 {
		t.Errorf("initial cluster for the new member: %s", initialNew)
	}
	ms[1].start(t, bin, initialNew, "existing")
	endpoints = []string{ms[0].client, ms[1].client, ms[2].client}
	members = waitMembers(3)
	if got := members[1]; got.Name != ms[1].name || got.PeerURLs[0] != ms[1].peer {
		t.Errorf("the new member: %+v", got)
	}

	// Two of three lost: quorum lost, named, and the way out.
	ms[0].kill()
	ms[2].kill()
	_, err = etcdMembers(ctx, endpoints)
	if !errors.Is(err, ErrQuorumLost) || !strings.Contains(err.Error(), "1 of 3 members answer (control-plane-0, control-plane-2 do not)") ||
		!strings.Contains(err.Error(), "kubeplug up --restore-from") {
		t.Errorf("with 2 of 3 members lost: %v", err)
	}
	if _, err := replaceEtcdMember(ctx, endpoints, ms[0].name, ms[0].peer); !errors.Is(err, ErrQuorumLost) {
		t.Errorf("a replacement without quorum: %v", err)
	}
}
