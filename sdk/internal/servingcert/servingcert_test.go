package servingcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRotation serves a pair over TLS, replaces its files as the kubelet
// does when kubeplug renews the Secret, and sees the next handshake present
// the new certificate; a half-written pair keeps the old one.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writePair(t, crt, key, 1)
	f, err := New(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", f.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	served := func() int64 {
		t.Helper()
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test reads the certificate served, it trusts nothing
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if got := served(); got != 1 {
		t.Fatalf("served serial %d, want 1", got)
	}
	writePair(t, crt, key, 2)
	if got := served(); got != 2 {
		t.Fatalf("after the files changed: served serial %d, want 2", got)
	}
	if err := os.WriteFile(key, []byte("half written"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != 2 {
		t.Fatalf("with a broken key file: served serial %d, want the previous certificate (2)", got)
	}
	if err := os.Remove(crt); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != 2 {
		t.Fatalf("with the certificate file gone: served serial %d, want the previous certificate (2)", got)
	}
}

func TestNewReportsABrokenPair(t *testing.T) {
	dir := t.TempDir()
	if _, err := New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")); err == nil {
		t.Fatal("New of missing files: no error")
	}
}

// writePair writes a self-signed certificate with the serial, with a file
// modification time of its own, as a new Secret's files have.
func writePair(t *testing.T, crt, key string, serial int64) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	mtime := time.Now().Add(time.Duration(serial) * time.Second)
	for name, b := range map[string][]byte{
		crt: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}),
	} {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(name, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}
