package serving

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestKeyPairs issues a plugin's key pair once, keeps it, and issues it again
// when its declaration changes, when it is past two thirds of its lifetime,
// and when the CA that signed it is no longer trusted; the plugin's own CA
// rotates with the old one kept in the bundle.
func TestKeyPairs(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	dir := t.TempDir()
	s := &KeyPairStore{Dir: filepath.Join(dir, "plugins", "agent"), Policy: Policy{CAValidity: 90 * 24 * time.Hour, Now: clock}}
	clusterCA, err := newCA("cluster", s.Policy.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	cluster := KeyPairCA{CertPEM: clusterCA.certPEM, KeyPEM: clusterCA.keyPEM}
	req := KeyPairRequest{Name: "agent", CommonName: "agent", Organizations: []string{"agents"},
		DNSNames: []string{"agent.local"}, IPAddresses: []string{"10.0.0.1"}, Client: true, Server: true, Validity: 30 * 24 * time.Hour}

	first, err := s.Ensure(req, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Issued {
		t.Fatal("the first Ensure did not issue")
	}
	cert := mustCert(t, first.CertPEM)
	if cert.Subject.CommonName != "agent" || cert.Subject.Organization[0] != "agents" || cert.DNSNames[0] != "agent.local" || !cert.IPAddresses[0].Equal([]byte{10, 0, 0, 1}) {
		t.Fatalf("certificate names: %v %v %v %v", cert.Subject.CommonName, cert.Subject.Organization, cert.DNSNames, cert.IPAddresses)
	}
	if len(cert.ExtKeyUsage) != 2 {
		t.Fatalf("usages: %v", cert.ExtKeyUsage)
	}
	if cert.CheckSignatureFrom(clusterCA.cert) != nil {
		t.Fatal("not signed by the cluster CA")
	}
	if st, err := os.Stat(filepath.Join(s.Dir, "agent.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}

	step := func(name string, want bool, r KeyPairRequest, ca KeyPairCA) IssuedKeyPair {
		t.Helper()
		got, err := s.Ensure(r, ca)
		if err != nil {
			t.Fatal(err)
		}
		if got.Issued != want {
			t.Fatalf("%s: issued %v, want %v", name, got.Issued, want)
		}
		return got
	}
	again := step("unchanged", false, req, cluster)
	if !bytes.Equal(again.CertPEM, first.CertPEM) || !bytes.Equal(again.KeyPEM, first.KeyPEM) {
		t.Fatal("an unchanged pair was not kept")
	}
	now = now.Add(19 * 24 * time.Hour) // less than two thirds of 30 days
	step("young", false, req, cluster)
	now = now.Add(2 * 24 * time.Hour) // past two thirds
	step("due", true, req, cluster)
	step("renewed", false, req, cluster)

	changed := req
	changed.DNSNames = append(changed.DNSNames, "agent.example.com")
	step("declaration changed", true, changed, cluster)
	step("changed, then kept", false, changed, cluster)

	otherCA, err := newCA("other", s.Policy.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	step("another cluster CA", true, changed, KeyPairCA{CertPEM: otherCA.certPEM, KeyPEM: otherCA.keyPEM})

	// The plugin's own CA: made once, kept, rotated past two thirds of its
	// life with the old CA in the bundle, and a pair it signed kept while
	// fresh.
	own, err := s.OwnCA("agent")
	if err != nil {
		t.Fatal(err)
	}
	own2, err := s.OwnCA("agent")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(own.CertPEM, own2.CertPEM) {
		t.Fatal("the plugin's CA was not kept")
	}
	short := changed
	short.Validity = 10 * 24 * time.Hour
	step("own CA", true, short, own)
	now = now.Add(61 * 24 * time.Hour) // the CA (90 days) is due; the pair is not yet
	rotated, err := s.OwnCA("agent")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(rotated.CertPEM, own.CertPEM) || !bytes.Contains(rotated.BundlePEM, own.CertPEM) {
		t.Fatal("the plugin's CA did not rotate keeping the old one in its bundle")
	}
	_ = step("signed by the previous CA", true, short, rotated) // issued 61 days ago: past 10 days
	kept := step("fresh", false, short, rotated)
	if mustCert(t, kept.CertPEM).CheckSignatureFrom(mustCert(t, rotated.CertPEM)) != nil {
		t.Fatal("the renewed pair is not signed by the new CA")
	}
	if !bytes.Equal(kept.CABundlePEM, rotated.BundlePEM) {
		t.Fatal("the pair's CA file is not the bundle")
	}

	if _, err := s.Ensure(req, KeyPairCA{CertPEM: first.CertPEM, KeyPEM: first.KeyPEM}); err == nil {
		t.Fatal("a leaf certificate was taken as a CA")
	}
}

func mustCert(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	c, err := parseCert(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
