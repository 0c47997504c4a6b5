package hosts

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

func TestHostsOfNamesTheField(t *testing.T) {
	key := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(key, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec *v1alpha1.HostsProvider
		want []string
	}{
		{"no pools", &v1alpha1.HostsProvider{}, []string{"spec.provider.hosts.pools: lists no pool"}},
		{"no key", &v1alpha1.HostsProvider{Pools: []v1alpha1.HostPool{{Name: "workers", Hosts: []v1alpha1.Host{{Address: "10.0.0.1"}}}}},
			[]string{"spec.provider.hosts.pools[0].hosts[0].ssh: no key"}},
		{"bad address, duplicate, bad port, bad jump, missing key file", &v1alpha1.HostsProvider{
			SSH: &v1alpha1.HostSSH{KeyFile: key, Port: 70000},
			Pools: []v1alpha1.HostPool{
				{Name: "workers", Hosts: []v1alpha1.Host{{Address: "a b"}, {Address: "10.0.0.2"}, {Address: "10.0.0.2", SSH: &v1alpha1.HostSSH{Jump: "@x", KeyFile: "/nonexistent/key"}}}},
				{Name: "workers", Hosts: []v1alpha1.Host{{Address: "10.0.0.3"}}},
				{Name: "control-plane", Hosts: []v1alpha1.Host{{Address: "10.0.0.4"}, {Address: "10.0.0.5"}}},
			}},
			[]string{
				"spec.provider.hosts.ssh.port: 70000 is not a port",
				`spec.provider.hosts.pools[0].hosts[0].address: "a b" is not an IP address`,
				"spec.provider.hosts.pools[0].hosts[2].address: 10.0.0.2 is already the host at spec.provider.hosts.pools[0].hosts[1]",
				"spec.provider.hosts.pools[0].hosts[2].ssh.jump:",
				"spec.provider.hosts.pools[0].hosts[2].ssh.keyFile:",
				"spec.provider.hosts.pools[1].name: pool workers is already listed at spec.provider.hosts.pools[0]",
				"spec.provider.hosts.pools[2].hosts: 2 hosts: the control plane runs on one host",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := hostsOf(tc.spec)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestHostsOfResolves(t *testing.T) {
	key := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(key, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	hosts, err := hostsOf(&v1alpha1.HostsProvider{
		SSH: &v1alpha1.HostSSH{KeyFile: key, User: "admin", Jump: "bastion.example:2222"},
		Pools: []v1alpha1.HostPool{
			{Name: "control-plane", Hosts: []v1alpha1.Host{{Address: "10.0.0.1"}}},
			{Name: "workers", Hosts: []v1alpha1.Host{{Address: "10.0.0.2", SSH: &v1alpha1.HostSSH{Port: 2200, User: "ops"}}}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if got := hosts[0]; got.Node != "control-plane-0" || got.User != "admin" || got.Port != 22 || got.Jump.Address != "bastion.example" || got.Jump.Port != 2222 || got.Jump.User != "admin" {
		t.Errorf("host 0 = %+v, jump %+v", got, got.Jump)
	}
	if got := hosts[1]; got.Node != "workers-0" || got.User != "ops" || got.Addr() != "10.0.0.2:2200" || got.KeyFile != key {
		t.Errorf("host 1 = %+v", got)
	}
}

// sshServer runs an SSH server with a new host key on loopback that accepts
// the given client key and nothing else; it answers no channel.
func sshServer(t *testing.T, client ssh.PublicKey) (addr string, hostKey ssh.PublicKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) == string(client.Marshal()) {
			return nil, nil
		}
		return nil, errors.New("unknown key")
	}}
	cfg.AddHostKey(signer)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = conn.Close() }()
				sc, chans, reqs, err := ssh.NewServerConn(conn, cfg)
				if err != nil {
					return
				}
				go ssh.DiscardRequests(reqs)
				for ch := range chans {
					_ = ch.Reject(ssh.Prohibited, "test server")
				}
				_ = sc.Close()
			}()
		}
	}()
	return l.Addr().String(), signer.PublicKey()
}

// clientKey writes a new private key file and returns its path and public key.
func clientKey(t *testing.T) (string, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return file, sp
}

func testHost(t *testing.T, addr, keyFile string) *Host {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	var h Host
	h.Node, h.Pool, h.Field, h.Address, h.User, h.KeyFile = "workers-0", "workers", "spec.provider.hosts.pools[0].hosts[0]", host, "root", keyFile
	if _, err := fmtSscan(port, &h.Port); err != nil {
		t.Fatal(err)
	}
	return &h
}

// TestHostKeyPolicy: an unknown key is refused naming its fingerprint; with
// acceptNew it is learnt; a changed key is refused even with acceptNew,
// naming both fingerprints.
func TestHostKeyPolicy(t *testing.T) {
	ctx := context.Background()
	keyFile, pub := clientKey(t)
	addr, hostKey := sshServer(t, pub)
	known := filepath.Join(t.TempDir(), "ssh", "known_hosts")
	h := testHost(t, addr, keyFile)
	fp := ssh.FingerprintSHA256(hostKey)

	_, err := dial(ctx, h, &hostKeys{file: known})
	if !errors.Is(err, ErrHostKey) || !strings.Contains(err.Error(), fp) || !strings.Contains(err.Error(), "is not in "+known) || !strings.Contains(err.Error(), "--accept-new-host-keys") {
		t.Fatalf("unknown key: err = %v, want ErrHostKey naming %s", err, fp)
	}
	c, err := dial(ctx, h, &hostKeys{file: known, acceptNew: true})
	if err != nil {
		t.Fatalf("accept new: %v", err)
	}
	c.Close()
	// Learnt: strict connects now.
	c, err = dial(ctx, h, &hostKeys{file: known})
	if err != nil {
		t.Fatalf("known key: %v", err)
	}
	c.Close()

	// A wrong key is refused as an authentication failure naming the user.
	other, _ := clientKey(t)
	_, err = dial(ctx, testHost(t, addr, other), &hostKeys{file: known})
	if err == nil || !strings.Contains(err.Error(), "ssh as root") || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("wrong key: err = %v", err)
	}

	// Another server on the same address and port: a changed key.
	b, err := os.ReadFile(known)
	if err != nil {
		t.Fatal(err)
	}
	addr2, hostKey2 := sshServer(t, pub)
	_, port2, _ := net.SplitHostPort(addr2)
	if err := os.WriteFile(known, []byte(strings.ReplaceAll(string(b), "]:"+itoa(h.Port), "]:"+port2)), 0o600); err != nil {
		t.Fatal(err)
	}
	h2 := testHost(t, addr2, keyFile)
	_, err = dial(ctx, h2, &hostKeys{file: known, acceptNew: true})
	if !errors.Is(err, ErrHostKey) || !strings.Contains(err.Error(), "CHANGED") || !strings.Contains(err.Error(), ssh.FingerprintSHA256(hostKey2)) || !strings.Contains(err.Error(), fp) {
		t.Fatalf("changed key: err = %v, want ErrHostKey naming %s and %s", err, ssh.FingerprintSHA256(hostKey2), fp)
	}
	if after, _ := os.ReadFile(known); strings.Count(string(after), "\n") != 1 {
		t.Errorf("known_hosts changed on a refused key:\n%s", after)
	}
}

// TestUnreachableHostNamed: the other hosts go on, the error names the address.
func TestUnreachableHostNamed(t *testing.T) {
	keyFile, pub := clientKey(t)
	addr, _ := sshServer(t, pub)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	_ = l.Close()
	p := &Provider{opts: Options{Parallel: 2, Events: func(providerEvent) {}, Logger: slog.New(slog.DiscardHandler)}, keys: &hostKeys{file: filepath.Join(t.TempDir(), "known_hosts"), acceptNew: true}}
	good, bad := testHost(t, addr, keyFile), testHost(t, dead, keyFile)
	bad.Node = "workers-1"
	var ran []string
	err = p.eachHost(context.Background(), []*Host{good, bad}, func(_ context.Context, c *client) error {
		ran = append(ran, c.host.Node)
		return nil
	})
	var he *HostError
	if !errors.As(err, &he) || len(he.Failed) != 1 || he.Failed[bad.Address] == nil || !strings.Contains(err.Error(), dead) {
		t.Fatalf("err = %v, want a HostError naming %s", err, dead)
	}
	if len(ran) != 1 || ran[0] != "workers-0" {
		t.Errorf("ran on %v, want workers-0", ran)
	}
}
