package clusterpki

import (
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
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the paths of the files EnsurePKI generates in a PKI directory. The
// certificates are valid for ten years: a reused data directory must not expire
// under a long-lived cluster.
type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// File names inside a PKI directory, as kubeadm names them where it can: the
// control plane's command lines and the providers' node files name them.
const (
	CACert           = "ca.crt"
	CAKey            = "ca.key"
	APIServerCert    = "apiserver.crt"
	APIServerKey     = "apiserver.key"
	ServingCert      = "loopback-serving.crt" // kube-controller-manager, kube-scheduler
	ServingKey       = "loopback-serving.key"
	AdminCert        = "admin.crt"
	AdminKey         = "admin.key"
	FrontProxyCACert = "front-proxy-ca.crt"
	FrontProxyCAKey  = "front-proxy-ca.key"
	FrontProxyCert   = "front-proxy-client.crt"
	FrontProxyKey    = "front-proxy-client.key"
	SAKey            = "sa.key"
	SAPub            = "sa.pub"
)

// AdminUser is the user name in the cluster-admin client certificate; its group
// is system:masters.
const AdminUser = "kubeplug-admin"

// FrontProxyClientName is the CN the API server presents to aggregated API
// servers; it is in --requestheader-allowed-names.
const FrontProxyClientName = "front-proxy-client"

// EnsurePKI creates the control plane's CA, certificates and keys in dir,
// unless dir already holds them: for the local control plane
// (controlplane.Start) and for one that runs elsewhere (a control-plane
// machine, host or instance), whose API server's certificate also names the
// machine's addresses.
func EnsurePKI(dir string, serviceIP net.IP, machineIPs ...net.IP) error {
	_, err := ensurePKI(dir, serviceIP, machineIPs...)
	return err
}

// IdentityFiles are the files of a PKI directory that make a cluster's
// identity: the CA, the front proxy's CA and the service-account key pair.
// Given these (a restore from an etcd snapshot brings them back), EnsurePKI
// makes the rest anew for this machine's addresses, so that clients,
// kube-root-ca.crt and stored service-account tokens of the restored cluster
// stay valid.
var IdentityFiles = []string{CACert, CAKey, FrontProxyCACert, FrontProxyCAKey, SAKey, SAPub}

// leaf is a certificate and key the PKI issues: its files, its issuer and
// what it says.
type leaf struct {
	cert, key string
	issuer    *x509.Certificate
	signer    crypto.Signer
	tmpl      x509.Certificate
}

// issue makes a new key and certificate for each leaf and writes them.
func (p pki) issue(leaves []leaf) error {
	for _, l := range leaves {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("generate key for %s: %w", l.cert, err)
		}
		tmpl := l.tmpl
		der, err := sign(&tmpl, l.issuer, key.Public(), l.signer)
		if err != nil {
			return fmt.Errorf("sign %s: %w", l.cert, err)
		}
		if err := writeCertAndKey(p.path(l.cert), p.path(l.key), der, key); err != nil {
			return err
		}
	}
	return nil
}

// ensurePKI creates the CA, certificates and keys unless DataDir/pki already
// holds them (a reused data directory keeps its identity, so clients and stored
// service account tokens stay valid). A directory that holds only
// IdentityFiles keeps those and gets the leaf certificates.
func ensurePKI(dir string, serviceIP net.IP, machineIPs ...net.IP) (pki, error) {
	p := pki{dir: dir}
	if _, err := os.Stat(p.path(SAPub)); err == nil {
		if _, err := os.Stat(p.path(APIServerCert)); err == nil {
			return p, nil
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return p, fmt.Errorf("create pki directory %s: %w", dir, err)
	}
	ca, caSigner, caNew, err := loadOrNewCA(p.path(CACert), p.path(CAKey), "kubeplug-local-ca")
	if err != nil {
		return p, err
	}
	fpCA, fpSigner, fpNew, err := loadOrNewCA(p.path(FrontProxyCACert), p.path(FrontProxyCAKey), "kubeplug-local-front-proxy-ca")
	if err != nil {
		return p, err
	}
	loopback := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	leaves := []leaf{
		{APIServerCert, APIServerKey, ca, caSigner, x509.Certificate{
			Subject:     pkix.Name{CommonName: "kube-apiserver"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
			IPAddresses: append(append(loopback, serviceIP), machineIPs...),
		}},
		{ServingCert, ServingKey, ca, caSigner, x509.Certificate{
			Subject:     pkix.Name{CommonName: "localhost"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			DNSNames:    []string{"localhost"},
			IPAddresses: loopback,
		}},
		{AdminCert, AdminKey, ca, caSigner, x509.Certificate{
			Subject:     pkix.Name{CommonName: AdminUser, Organization: []string{"system:masters"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
		{FrontProxyCert, FrontProxyKey, fpCA, fpSigner, x509.Certificate{
			Subject:     pkix.Name{CommonName: FrontProxyClientName},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
	}
	if err := p.issue(leaves); err != nil {
		return p, err
	}
	if caNew {
		if err := writeCertAndKey(p.path(CACert), p.path(CAKey), ca.Raw, caSigner); err != nil {
			return p, err
		}
	}
	if fpNew {
		if err := writeCertAndKey(p.path(FrontProxyCACert), p.path(FrontProxyCAKey), fpCA.Raw, fpSigner); err != nil {
			return p, err
		}
	}
	// The service account key pair is written last: its presence marks a
	// complete pki directory (see the check at the top).
	return p, p.ensureServiceAccountKey()
}

// ensureServiceAccountKey writes a new service-account key pair unless both
// halves are there (a restored identity keeps its pair).
func (p pki) ensureServiceAccountKey() error {
	if _, err := os.Stat(p.path(SAPub)); err == nil {
		if _, err := os.Stat(p.path(SAKey)); err == nil {
			return nil
		}
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate service account key: %w", err)
	}
	if err := writeKey(p.path(SAKey), sa); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return fmt.Errorf("marshal service account public key: %w", err)
	}
	return writePEM(p.path(SAPub), "PUBLIC KEY", pub, 0o644)
}

// loadOrNewCA reads the CA at certPath and keyPath, or makes a new one (new
// is then true) when neither exists; one without the other is an error.
func loadOrNewCA(certPath, keyPath, cn string) (cert *x509.Certificate, key crypto.Signer, isNew bool, err error) {
	_, certErr := os.Stat(certPath)
	_, keyErr := os.Stat(keyPath)
	switch {
	case errors.Is(certErr, os.ErrNotExist) && errors.Is(keyErr, os.ErrNotExist):
		cert, key, err = newCA(cn)
		return cert, key, true, err
	case certErr != nil || keyErr != nil:
		return nil, nil, false, fmt.Errorf("CA %s: certificate and key must both exist or both be absent: %w", certPath, errors.Join(certErr, keyErr))
	}
	cert, key, err = readCA(certPath, keyPath)
	return cert, key, false, err
}

// readCA reads a CA certificate and its PKCS#8 key.
func readCA(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	caPEM, err := os.ReadFile(certPath) //nolint:gosec // the caller's pki directory
	if err != nil {
		return nil, nil, fmt.Errorf("read CA: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath) //nolint:gosec // the caller's pki directory
	if err != nil {
		return nil, nil, fmt.Errorf("read CA key: %w", err)
	}
	cb, _ := pem.Decode(caPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("CA %s: not PEM", certPath)
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA %s: %w", certPath, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA key %s: %w", keyPath, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("CA key %s cannot sign", keyPath)
	}
	return ca, signer, nil
}

func newCA(cn string) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key for CA %s: %w", cn, err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := sign(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("self-sign CA %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA %s: %w", cn, err)
	}
	return cert, key, nil
}

// sign fills in serial number and validity and signs tmpl with the issuer's key.
func sign(tmpl, issuer *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-time.Hour) // tolerate small clock differences
	tmpl.NotAfter = now.Add(10 * 365 * 24 * time.Hour)
	if !tmpl.IsCA {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	}
	return x509.CreateCertificate(rand.Reader, tmpl, issuer, pub, signer)
}

func writeCertAndKey(certPath, keyPath string, der []byte, key crypto.Signer) error {
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return writeKey(keyPath, key)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("marshal private key %s: %w", path, err)
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

func writePEM(path, blockType string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	if data == nil {
		return fmt.Errorf("encode %s: %w", path, errors.New("pem encoding failed"))
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// IssueClientCert writes a client certificate for user cn in groups orgs, signed
// by the cluster CA in pkiDir (the one EnsurePKI made), and its key, to certPath and
// keyPath: the identity of a real node's kubelet or kube-proxy. An existing pair
// is kept.
func IssueClientCert(pkiDir, certPath, keyPath, cn string, orgs ...string) error {
	if _, err := os.Stat(keyPath); err == nil {
		if _, err := os.Stat(certPath); err == nil {
			return nil
		}
	}
	ca, signer, err := readCA(filepath.Join(pkiDir, CACert), filepath.Join(pkiDir, CAKey))
	if err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key for %s: %w", cn, err)
	}
	der, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: orgs},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, key.Public(), signer)
	if err != nil {
		return fmt.Errorf("sign certificate of %s: %w", cn, err)
	}
	if err := os.MkdirAll(filepath.Dir(certPath), 0o700); err != nil {
		return err
	}
	return writeCertAndKey(certPath, keyPath, der, key)
}

// CACertPath is the cluster CA's certificate in pkiDir.
func CACertPath(pkiDir string) string { return filepath.Join(pkiDir, CACert) }

// CAKeyPath is the cluster CA's key in pkiDir: for what the provider itself
// signs with it (a plugin's key pairs).
func CAKeyPath(pkiDir string) string { return filepath.Join(pkiDir, CAKey) }

// The etcd peer PKI of a stacked control plane, in the etcd/ directory of a
// PKI directory, as kubeadm lays it out.
const (
	EtcdCACert   = "etcd/ca.crt"
	EtcdCAKey    = "etcd/ca.key"
	EtcdPeerCert = "etcd/peer.crt"
	EtcdPeerKey  = "etcd/peer.key"
)

// EnsureEtcdPeerPKI creates, unless dir holds them, an etcd CA of its own
// (the cluster CA signs kubelets' certificates: none of them must be able to
// join etcd) and one peer certificate naming every member's address in ips,
// for both ends of the members' TLS (server and client auth). A peer
// certificate that does not name every address of ips is made anew with the
// same CA.
func EnsureEtcdPeerPKI(dir string, ips ...net.IP) error {
	if err := os.MkdirAll(filepath.Join(dir, "etcd"), 0o700); err != nil {
		return fmt.Errorf("create etcd pki directory: %w", err)
	}
	ca, signer, isNew, err := loadOrNewCA(filepath.Join(dir, EtcdCACert), filepath.Join(dir, EtcdCAKey), "kubeplug-etcd-ca")
	if err != nil {
		return err
	}
	if isNew {
		if err := writeCertAndKey(filepath.Join(dir, EtcdCACert), filepath.Join(dir, EtcdCAKey), ca.Raw, signer); err != nil {
			return err
		}
	} else if peerNames(filepath.Join(dir, EtcdPeerCert), ips) {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate etcd peer key: %w", err)
	}
	der, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kubeplug-etcd-peer"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...),
	}, ca, key.Public(), signer)
	if err != nil {
		return fmt.Errorf("sign etcd peer certificate: %w", err)
	}
	return writeCertAndKey(filepath.Join(dir, EtcdPeerCert), filepath.Join(dir, EtcdPeerKey), der, key)
}

// peerNames says whether the certificate at path names every address of ips.
func peerNames(path string, ips []net.IP) bool {
	b, err := os.ReadFile(path) //nolint:gosec // the caller's pki directory
	if err != nil {
		return false
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return false
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return false
	}
	for _, ip := range ips {
		if c.VerifyHostname(ip.String()) != nil {
			return false
		}
	}
	return true
}
