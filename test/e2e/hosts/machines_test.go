package hosts

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
)

// sshUser is the hosts' login: not root, sudo without a password.
const sshUser = "kp"

// passwordUser may log in with the same key but needs a password for sudo.
const passwordUser = "kpw"

// sshHosts boots n machines running sshd and returns them and the path of
// the private key that logs in as sshUser. Everything is removed when t ends
// (and checked).
func sshHosts(t *testing.T, n int) ([]*realnode.Machine, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("booting machines (runc, overlay mounts, network namespaces) needs root")
	}
	dir := os.Getenv(localnodeImageEnv)
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "_output", "machine")
	}
	base, err := baseLayer(dir)
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	// A layer of the test's own: cloud-init reads only the NoCloud seed.
	cfgLayer := filepath.Join(state, "layer")
	if err := os.MkdirAll(filepath.Join(cfgLayer, "etc", "cloud", "cloud.cfg.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgLayer, "etc", "cloud", "cloud.cfg.d", "90-test.cfg"), []byte("datasource_list: [NoCloud, None]\nlocale: C.UTF-8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	keyFile, pub := newKey(t, state)
	ctx := context.Background()
	id := realnode.ClusterID(state)
	subnet, err := realnode.ChooseSubnet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	network := realnode.Network{ID: id, Subnet: subnet, APIServerPort: 1}
	if err := network.EnsureBridge(ctx); err != nil {
		t.Fatal(err)
	}
	userData := fmt.Sprintf(`#cloud-config
users:
  - name: %[1]s
    shell: /bin/bash
    sudo: "ALL=(ALL) NOPASSWD:ALL"
    ssh_authorized_keys: [%[2]q]
  # A user whose sudo asks for a password.
  - name: %[3]s
    shell: /bin/bash
    sudo: "ALL=(ALL) ALL"
    ssh_authorized_keys: [%[2]q]
ssh_pwauth: false
# sudo looks its host name up; there is no DNS server on the test network.
manage_etc_hosts: true
`, sshUser, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), passwordUser)
	var ms []*realnode.Machine
	t.Cleanup(func() {
		for _, m := range ms {
			if err := m.Remove(ctx); err != nil {
				t.Errorf("remove machine %s: %v", m.Node.Name, err)
			}
		}
		if err := network.Teardown(ctx); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	for i := range n {
		name := fmt.Sprintf("host%d", i)
		m := &realnode.Machine{
			Node:     &realnode.Node{Name: name, Index: i, Dir: filepath.Join(state, "machines", name), Network: network},
			Image:    realnode.Image{Layers: []string{cfgLayer, base}},
			UserData: []byte(userData),
		}
		ms = append(ms, m)
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ms {
		if err := m.WaitBooted(ctx, 6*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	return ms, keyFile
}

// localnodeImageEnv names the machine image directory (make machine-image).
const localnodeImageEnv = "KUBEPLUG_MACHINE_IMAGE"

// baseLayer is the base layer of the machine image in dir.
func baseLayer(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, realnode.ImageFile)) //nolint:gosec // the test's image
	if err != nil {
		return "", fmt.Errorf("no machine image (make machine-image): %w", err)
	}
	var f struct{ Base string }
	if err := json.Unmarshal(b, &f); err != nil || f.Base == "" {
		return "", fmt.Errorf("%s: no base layer", dir)
	}
	base := filepath.Join(dir, f.Base)
	if _, err := os.Stat(filepath.Join(base, "usr", "sbin", "sshd")); err != nil {
		return "", fmt.Errorf("the machine image's base layer has no sshd (rebuild it: make machine-image): %w", err)
	}
	return base, nil
}

// newKey writes a new ed25519 private key under dir.
func newKey(t *testing.T, dir string) (string, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return file, sp
}

// hostsE2EEnv opts in to the tests that build clusters on the sshd machines.
// `make test` sets it in a run of its own after every other package
// (make test-hosts), so that these machines never boot beside the realnode
// package's; a bare `go test ./...` skips them.
const hostsE2EEnv = "KUBEPLUG_E2E_HOSTS"

func requireHostsE2E(t *testing.T) {
	t.Helper()
	if os.Getenv(hostsE2EEnv) == "" {
		t.Skipf("the hosts provider's e2e tests run with %s=1 (make test-hosts)", hostsE2EEnv)
	}
}
