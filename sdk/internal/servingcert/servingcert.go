package servingcert

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
)

// Files is a certificate and key file pair, re-read when either changes (its
// modification time or size). Make it with New; it is safe for concurrent use.
type Files struct {
	certFile, keyFile string
	mu                sync.Mutex
	stamp             string
	cert              *tls.Certificate
}

// New returns the pair certFile, keyFile, loaded once to report a missing or
// broken pair before anything is served.
func New(certFile, keyFile string) (*Files, error) {
	f := &Files{certFile: certFile, keyFile: keyFile}
	if _, err := f.GetCertificate(nil); err != nil {
		return nil, err
	}
	return f, nil
}

// GetCertificate is tls.Config's GetCertificate: the current certificate,
// re-read if the files changed since the last handshake. A pair that no longer
// loads (the kubelet is half-way through writing it) keeps the certificate
// served before.
func (f *Files) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	stamp := ""
	for _, name := range []string{f.certFile, f.keyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			if cert := f.current(); cert != nil {
				return cert, nil
			}
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
		stamp += fmt.Sprint(fi.ModTime().UnixNano(), fi.Size(), ";")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cert != nil && stamp == f.stamp {
		return f.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		if f.cert != nil {
			return f.cert, nil
		}
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	f.cert, f.stamp = &cert, stamp
	return f.cert, nil
}

func (f *Files) current() *tls.Certificate {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cert
}

// TLSConfig is a server configuration serving f, TLS 1.2 or later.
func (f *Files) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: f.GetCertificate}
}
