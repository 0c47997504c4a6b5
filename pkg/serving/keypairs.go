package serving

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/kubeplug/kubeplug/internal/bounded"
)

// A plugin's key pairs (contributes.keyPairs, kube-aws's pki.keypairs) are
// kept as the serving certificates are — the same freshness rule, the same CA
// rotation that keeps the previous CA trusted until it expires — but in files
// of the provider's state directory rather than in Secrets, since they go to
// machines, not Pods.

// KeyPairRequest is one key pair a plugin declares.
type KeyPairRequest struct {
	// Name is the pair's file stem, unique in its store.
	Name          string   `json:"name"`
	CommonName    string   `json:"commonName"`
	Organizations []string `json:"organizations,omitempty"`
	DNSNames      []string `json:"dnsNames,omitempty"`
	IPAddresses   []string `json:"ipAddresses,omitempty"`
	// Server and Client are the extended key usages.
	Server bool `json:"server,omitempty"`
	Client bool `json:"client,omitempty"`
	// Validity is the certificate's lifetime; zero is Policy.CertValidity.
	Validity time.Duration `json:"validity,omitempty"`
}

// KeyPairCA is the CA that signs a pair: its certificate and key, PEM, and
// the bundle machines trust (the certificate, then earlier CAs still valid).
type KeyPairCA struct {
	CertPEM, KeyPEM, BundlePEM []byte
}

// IssuedKeyPair is a pair as the machines get it.
type IssuedKeyPair struct {
	CertPEM, KeyPEM []byte
	// CABundlePEM is the signing CA's bundle.
	CABundlePEM []byte
	// Issued reports whether Ensure made the certificate now (missing, due,
	// signed by a CA no longer trusted, or declared otherwise than it was).
	Issued bool
}

// KeyPairStore keeps key pairs in Dir: NAME.crt, NAME.key (0600) and
// NAME.spec, the digest of the declaration the certificate was made for.
type KeyPairStore struct {
	Dir    string
	Policy Policy
}

// OwnCA returns the store's own CA (Dir/ca.crt, ca.key, ca-bundle.crt) for a
// plugin that signs its pairs itself: kept while it has more than a third of
// its lifetime left, else made anew with the old one kept in the bundle until
// it expires.
func (s *KeyPairStore) OwnCA(name string) (KeyPairCA, error) {
	p := s.Policy.withDefaults()
	certPEM, _ := s.read("ca.crt")
	keyPEM, _ := s.read("ca.key")
	bundlePEM, _ := s.read("ca-bundle.crt")
	now := p.Now()
	c := loadCA(certPEM, keyPEM, bundlePEM, now)
	if c != nil && fresh(c.cert, now) {
		return KeyPairCA{CertPEM: c.certPEM, KeyPEM: c.keyPEM, BundlePEM: c.bundle()}, nil
	}
	n, err := rotate(c, name, p)
	if err != nil {
		return KeyPairCA{}, fmt.Errorf("key pairs: CA of %s: %w", name, err)
	}
	for _, f := range []struct {
		name string
		b    []byte
		mode os.FileMode
	}{{"ca.key", n.keyPEM, 0o600}, {"ca.crt", n.certPEM, 0o644}, {"ca-bundle.crt", n.bundle(), 0o644}} {
		if err := s.write(f.name, f.b, f.mode); err != nil {
			return KeyPairCA{}, err
		}
	}
	return KeyPairCA{CertPEM: n.certPEM, KeyPEM: n.keyPEM, BundlePEM: n.bundle()}, nil
}

// Ensure returns the pair req declares, signed by ca: the one in the store
// while it is still what req asks for, signed by a CA of ca's bundle, and has
// more than a third of its lifetime left; else a new one, written to the store
// before it is returned.
func (s *KeyPairStore) Ensure(req KeyPairRequest, ca KeyPairCA) (IssuedKeyPair, error) {
	p := s.Policy.withDefaults()
	bundle := ca.BundlePEM
	if len(bundle) == 0 {
		bundle = ca.CertPEM
	}
	signer := loadCA(ca.CertPEM, ca.KeyPEM, bundle, p.Now())
	if signer == nil {
		return IssuedKeyPair{}, fmt.Errorf("key pair %s: the signing CA's certificate and key are not a CA", req.Name)
	}
	spec, err := specDigest(req)
	if err != nil {
		return IssuedKeyPair{}, err
	}
	certPEM, _ := s.read(req.Name + ".crt")
	keyPEM, _ := s.read(req.Name + ".key")
	oldSpec, _ := s.read(req.Name + ".spec")
	if string(oldSpec) == spec && signer.pairOK(certPEM, keyPEM, p.Now()) {
		return IssuedKeyPair{CertPEM: certPEM, KeyPEM: keyPEM, CABundlePEM: bundle}, nil
	}
	certPEM, keyPEM, err = signer.issuePair(req, p)
	if err != nil {
		return IssuedKeyPair{}, fmt.Errorf("key pair %s: %w", req.Name, err)
	}
	if err := s.write(req.Name+".key", keyPEM, 0o600); err != nil {
		return IssuedKeyPair{}, err
	}
	if err := s.write(req.Name+".crt", certPEM, 0o644); err != nil {
		return IssuedKeyPair{}, err
	}
	if err := s.write(req.Name+".spec", []byte(spec), 0o644); err != nil {
		return IssuedKeyPair{}, err
	}
	return IssuedKeyPair{CertPEM: certPEM, KeyPEM: keyPEM, CABundlePEM: bundle, Issued: true}, nil
}

// specDigest identifies a declaration: a pair made for another one is issued
// again.
func specDigest(req KeyPairRequest) (string, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// pairOK reports whether a stored pair can stay: a certificate and its key,
// signed by c or a CA its bundle still trusts, and fresh.
func (c *ca) pairOK(certPEM, keyPEM []byte, now time.Time) bool {
	cert, err := parseCert(certPEM)
	if err != nil {
		return false
	}
	key, err := parseKey(keyPEM)
	return err == nil && samePublic(cert, key) && fresh(cert, now) && c.signed(cert)
}

// issuePair signs a certificate for req with c.
func (c *ca) issuePair(req KeyPairRequest, p Policy) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := p.Now()
	validity := req.Validity
	if validity <= 0 {
		validity = p.CertValidity
	}
	notAfter := now.Add(validity)
	if notAfter.After(c.cert.NotAfter) {
		notAfter = c.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: req.CommonName, Organization: req.Organizations},
		DNSNames:     req.DNSNames,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	for _, s := range req.IPAddresses {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, nil, fmt.Errorf("%q is not an IP address", s)
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	if req.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if req.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	return c.sign(tmpl, key)
}

func (s *KeyPairStore) read(name string) ([]byte, error) {
	return bounded.ReadFile(filepath.Join(s.Dir, name), 1<<20)
}

// write replaces a file of the store atomically, so a pair is never half
// written.
func (s *KeyPairStore) write(name string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("key pairs: %w", err)
	}
	p := filepath.Join(s.Dir, name)
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, b) {
		return nil
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return fmt.Errorf("key pairs: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("key pairs: %w", err)
	}
	return nil
}
