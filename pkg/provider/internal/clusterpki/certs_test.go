package clusterpki_test

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/provider/internal/clusterpki"
)

// A PKI directory that holds only a cluster's identity (what a restore from
// an etcd snapshot brings back) keeps it: the leaves are made anew, for this
// machine's address, and signed by the restored CA.
func TestEnsurePKIKeepsRestoredIdentity(t *testing.T) {
	orig, restored := t.TempDir(), t.TempDir()
	svc := net.ParseIP("10.96.0.1")
	if err := clusterpki.EnsurePKI(orig, svc, net.ParseIP("10.250.1.2")); err != nil {
		t.Fatal(err)
	}
	for _, name := range clusterpki.IdentityFiles {
		b, err := os.ReadFile(filepath.Join(orig, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(restored, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	newIP := net.ParseIP("10.250.7.2")
	if err := clusterpki.EnsurePKI(restored, svc, newIP); err != nil {
		t.Fatal(err)
	}
	for _, name := range clusterpki.IdentityFiles {
		a, _ := os.ReadFile(filepath.Join(orig, name))
		b, _ := os.ReadFile(filepath.Join(restored, name))
		if !bytes.Equal(a, b) {
			t.Errorf("%s changed", name)
		}
	}
	ca := readCert(t, filepath.Join(restored, "ca.crt"))
	srv := readCert(t, filepath.Join(restored, "apiserver.crt"))
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := srv.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
		t.Errorf("the new API server certificate is not signed by the restored CA: %v", err)
	}
	if err := srv.VerifyHostname(newIP.String()); err != nil {
		t.Errorf("the new API server certificate does not name the new address: %v", err)
	}
	// A CA certificate without its key is an error, not a new CA.
	half := t.TempDir()
	b, _ := os.ReadFile(filepath.Join(orig, "ca.crt"))
	_ = os.WriteFile(filepath.Join(half, "ca.crt"), b, 0o600)
	if err := clusterpki.EnsurePKI(half, svc); err == nil {
		t.Error("a CA certificate without its key was accepted")
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: not PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The etcd peer certificate is signed by an etcd CA of its own, names every
// member, serves and authenticates; a new member's address gets a new
// certificate from the same CA.
func TestEnsureEtcdPeerPKI(t *testing.T) {
	dir := t.TempDir()
	a, b, c := net.ParseIP("10.250.3.2"), net.ParseIP("10.250.3.3"), net.ParseIP("10.250.3.4")
	if err := clusterpki.EnsureEtcdPeerPKI(dir, a, b); err != nil {
		t.Fatal(err)
	}
	ca := readCert(t, filepath.Join(dir, clusterpki.EtcdCACert))
	peer := readCert(t, filepath.Join(dir, clusterpki.EtcdPeerCert))
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := peer.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("peer certificate for %v: %v", usage, err)
		}
	}
	for _, ip := range []net.IP{a, b} {
		if err := peer.VerifyHostname(ip.String()); err != nil {
			t.Error(err)
		}
	}
	// Again with the same members: nothing changes.
	before, _ := os.ReadFile(filepath.Join(dir, clusterpki.EtcdPeerCert))
	if err := clusterpki.EnsureEtcdPeerPKI(dir, a, b); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, clusterpki.EtcdPeerCert)); !bytes.Equal(before, after) {
		t.Error("the peer certificate was made anew for the same members")
	}
	if err := clusterpki.EnsureEtcdPeerPKI(dir, a, b, c); err != nil {
		t.Fatal(err)
	}
	peer = readCert(t, filepath.Join(dir, clusterpki.EtcdPeerCert))
	if err := peer.VerifyHostname(c.String()); err != nil {
		t.Error(err)
	}
	if ca2 := readCert(t, filepath.Join(dir, clusterpki.EtcdCACert)); !ca2.Equal(ca) {
		t.Error("the etcd CA changed")
	}
	// Not the cluster CA.
	if err := clusterpki.EnsurePKI(dir, net.ParseIP("10.96.0.1")); err != nil {
		t.Fatal(err)
	}
	if cluster := readCert(t, filepath.Join(dir, "ca.crt")); cluster.Equal(ca) {
		t.Error("etcd's CA is the cluster CA")
	}
}
