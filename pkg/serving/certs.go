package serving

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"
)

// Policy says how long issued certificates live and when they are renewed.
type Policy struct {
	// CAValidity is a new CA's lifetime. Default 10 years.
	CAValidity time.Duration
	// CertValidity is a new serving certificate's lifetime. Default 1 year.
	CertValidity time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// DefaultPolicy is the policy with its defaults.
func DefaultPolicy() Policy {
	return Policy{CAValidity: 10 * 365 * 24 * time.Hour, CertValidity: 365 * 24 * time.Hour, Now: time.Now}
}

func (p Policy) withDefaults() Policy {
	d := DefaultPolicy()
	if p.CAValidity <= 0 {
		p.CAValidity = d.CAValidity
	}
	if p.CertValidity <= 0 {
		p.CertValidity = d.CertValidity
	}
	if p.CertValidity > p.CAValidity {
		p.CertValidity = p.CAValidity
	}
	if p.Now == nil {
		p.Now = d.Now
	}
	return p
}

// fresh reports whether a certificate is valid now and more than a third of its
// lifetime from expiry: past two thirds it is renewed.
func fresh(c *x509.Certificate, now time.Time) bool {
	life := c.NotAfter.Sub(c.NotBefore)
	return now.After(c.NotBefore) && c.NotAfter.Sub(now) > life/3
}

// ca is a serving CA: its certificate and key, and the earlier CAs still trusted.
type ca struct {
	cert     *x509.Certificate
	certPEM  []byte
	key      crypto.Signer
	keyPEM   []byte
	previous [][]byte // PEM of earlier CAs not yet expired
}

// bundle is what caBundle fields and ca.crt hold: the current CA, then the
// earlier ones still valid.
func (c *ca) bundle() []byte {
	out := slices.Clone(c.certPEM)
	for _, p := range c.previous {
		out = append(out, p...)
	}
	return out
}

// loadCA parses a CA Secret's data; nil when it holds no usable CA.
func loadCA(certPEM, keyPEM, bundlePEM []byte, now time.Time) *ca {
	cert, err := parseCert(certPEM)
	if err != nil || !cert.IsCA {
		return nil
	}
	key, err := parseKey(keyPEM)
	if err != nil || !samePublic(cert, key) {
		return nil
	}
	c := &ca{cert: cert, certPEM: certPEM, key: key, keyPEM: keyPEM}
	for _, p := range splitPEM(bundlePEM) {
		old, err := parseCert(p)
		if err == nil && !bytes.Equal(old.Raw, cert.Raw) && now.Before(old.NotAfter) {
			c.previous = append(c.previous, p)
		}
	}
	return c
}

// rotate returns a new CA that keeps c (if valid) and c's still-valid
// predecessors in its bundle.
func rotate(c *ca, name string, p Policy) (*ca, error) {
	n, err := newCA(name, p)
	if err != nil {
		return nil, err
	}
	if c != nil {
		now := p.Now()
		if now.Before(c.cert.NotAfter) {
			n.previous = append(n.previous, c.certPEM)
		}
		n.previous = append(n.previous, c.previous...)
	}
	return n, nil
}

func newCA(name string, p Policy) (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := p.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name + "-ca@" + fmt.Sprint(now.Unix()), Organization: []string{"kubeplug"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(p.CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &ca{
		cert: cert, key: key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// issue signs a serving certificate for the DNS names with c.
func (c *ca) issue(names []string, p Policy) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := p.Now()
	notAfter := now.Add(p.CertValidity)
	if notAfter.After(c.cert.NotAfter) {
		notAfter = c.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	return c.sign(tmpl, key)
}

// servingOK reports whether a serving certificate and key can stay: a pair,
// signed by c, for every one of names, and fresh.
// sign issues tmpl for key, signed by the CA, and returns the certificate
// and the key as PEM.
func (c *ca) sign(tmpl *x509.Certificate, key *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, key.Public(), c.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

func (c *ca) servingOK(certPEM, keyPEM []byte, names []string, now time.Time) bool {
	cert, err := parseCert(certPEM)
	if err != nil {
		return false
	}
	key, err := parseKey(keyPEM)
	if err != nil || !samePublic(cert, key) || !fresh(cert, now) {
		return false
	}
	if !c.signed(cert) {
		return false
	}
	for _, n := range names {
		if cert.VerifyHostname(n) != nil {
			return false
		}
	}
	return true
}

// signed reports whether cert is signed by c's CA or an earlier one the bundle
// still trusts: after a CA rotation the certificate it signed stays until it is
// itself renewed, so the bundle published before it trusts it.
func (c *ca) signed(cert *x509.Certificate) bool {
	if cert.CheckSignatureFrom(c.cert) == nil {
		return true
	}
	for _, p := range c.previous {
		if prev, err := parseCert(p); err == nil && cert.CheckSignatureFrom(prev) == nil {
			return true
		}
	}
	return false
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

func parseCert(p []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(p)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

func parseKey(p []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(p)
	if b == nil {
		return nil, errors.New("no PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("key cannot sign")
	}
	return s, nil
}

func samePublic(c *x509.Certificate, k crypto.Signer) bool {
	pub, ok := c.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(k.Public())
}

func splitPEM(b []byte) [][]byte {
	var out [][]byte
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		out = append(out, pem.EncodeToMemory(blk))
	}
}
