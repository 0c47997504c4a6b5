package action

import (
	"errors"
	"fmt"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/expansion"
	"github.com/kubeplug/kubeplug/pkg/sign"
)

// ExpansionSignAllowlist signs a site's allowlist file (kubeplug expansion
// sign-allowlist), which a cluster file names as spec.expansions.allowFile.
type ExpansionSignAllowlist struct {
	// Key is the private key file (from plugin keygen); Password decrypts it.
	Key      string
	Password []byte
}

// SignedAllowlistResult is what ExpansionSignAllowlist wrote.
type SignedAllowlistResult struct {
	File      string `json:"file"`
	Signature string `json:"signature"`
	KeyID     string `json:"keyID"`
}

// Run checks that file is an allowlist and writes its signature to file.sig.
func (a *ExpansionSignAllowlist) Run(file string) (*SignedAllowlistResult, error) {
	if a.Key == "" {
		return nil, errors.New("no private key: pass --key FILE (make one with kubeplug plugin keygen)")
	}
	keyPEM, err := bounded.ReadFileAs("private key", a.Key, bounded.MaxKeySize)
	if err != nil {
		return nil, err
	}
	s, err := sign.LoadSigner(keyPEM, a.Password)
	if err != nil {
		if errors.Is(err, sign.ErrNoPassword) {
			return nil, fmt.Errorf("private key %s: %w: set KUBEPLUG_SIGNING_PASSWORD or pass --password-stdin", a.Key, err)
		}
		return nil, fmt.Errorf("private key %s: %w", a.Key, err)
	}
	sig, err := expansion.SignAllowlist(file, s)
	if err != nil {
		return nil, err
	}
	return &SignedAllowlistResult{File: file, Signature: sig, KeyID: s.KeyID()}, nil
}
