package expansion

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/sign"
)

// Verification says what verified a package.
type Verification struct {
	// Digest is the package's digest (see [Package.Digest]).
	Digest string `json:"digest"`
	// Signed says whether a signature verified.
	Signed bool `json:"signed"`
	// Key and KeyID name the key that verified the signature.
	Key   string `json:"key,omitempty"`
	KeyID string `json:"keyID,omitempty"`
}

// Verify checks what [Open] cannot on its own: that the package has checksums (so
// that Open compared every file against them) and, with keys, that its
// signature verifies over checksums.txt with one of them. Without keys a
// signature is not required, but one present must still be well formed. Call it
// on a package Open returned without a fatal diagnostic.
func (p *Package) Verify(keys []*sign.PublicKey) (*Verification, diag.List) {
	var l diag.List
	if p.Checksums == nil {
		l.Errorf(p.where(ChecksumsFile), 0, 0, "", "the expansion has no %s, so nothing pins its files: pack it with kubeplug expansion create", ChecksumsFile)
		return nil, l
	}
	v := &Verification{Digest: p.Digest()}
	if len(keys) == 0 {
		if p.Signature != nil {
			l.Warnf(p.where(SignatureFile), 0, 0, "", "the expansion is signed, but no --key was given to check the signature with")
		}
		return v, l
	}
	if p.Signature == nil {
		l.Errorf(p.where(SignatureFile), 0, 0, "", "expansion %s is not signed, and a signature is required (--key given); sign it with kubeplug expansion create --key", p.Name())
		return nil, l
	}
	k, err := sign.Verify(p.checksums, p.Signature, keys...)
	if err != nil {
		msg := err.Error()
		if errors.Is(err, sign.ErrBadSignature) {
			msg = strings.Replace(msg, "the archive changed", "the expansion's checksums changed", 1)
		}
		l.Errorf(p.where(SignatureFile), 0, 0, "", "expansion %s: %s", p.Name(), msg)
		return nil, l
	}
	v.Signed, v.Key, v.KeyID = true, k.Name, k.ID
	return v, l
}

// String describes a verification in one line.
func (v *Verification) String() string {
	if !v.Signed {
		return fmt.Sprintf("digest %s, every file matches its checksum (unsigned)", v.Digest)
	}
	return fmt.Sprintf("digest %s, every file matches its checksum, signed by %s (%s)", v.Digest, v.Key, v.KeyID)
}
