package expansion

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/sign"
)

// MaxAllowlistSize bounds a signed allowlist file.
const MaxAllowlistSize = 1 << 20

// SignedAllowlist is a site's allowlist read from a file of its own and
// verified against its detached signature.
type SignedAllowlist struct {
	Allow *v1alpha1.ExpansionAllow
	// Digest is "sha256:" and the hex SHA-256 of the file's bytes.
	Digest string
	// KeyID names the key whose signature verified.
	KeyID string
}

// LoadAllowlist reads the allowlist file path (the fields of
// v1alpha1.ExpansionAllow as YAML) and verifies the signature path+".sig"
// over its bytes with one of keys: a site signs its allowlist apart from the
// cluster file, so that who may change the file cannot widen what expansions
// may skip. An allowlist with no signature, none that verifies, or no key to
// verify it with is refused, naming the file and its digest; so is one that
// is not an allowlist, naming the field.
func LoadAllowlist(path string, keys []*sign.PublicKey) (*SignedAllowlist, error) {
	data, err := bounded.ReadFileAs("allowlist", path, MaxAllowlistSize)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	what := fmt.Sprintf("allowlist %s (%s)", path, digest)
	sigFile := path + sign.SigExt
	sig, err := bounded.ReadFileAs("signature", sigFile, bounded.MaxKeySize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s is not signed: %s is missing; the site signs it with kubeplug expansion sign-allowlist --key SITE.key %s", what, sigFile, path)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", what, err)
	case len(keys) == 0:
		return nil, fmt.Errorf("%s cannot be verified: pass the site's public key (--expansion-key, or --key to expansion verify)", what)
	}
	k, err := sign.Verify(data, sig, keys...)
	if err != nil {
		return nil, fmt.Errorf("%s is refused: its signature %s does not verify: %w", what, sigFile, err)
	}
	allow := &v1alpha1.ExpansionAllow{}
	if err := yaml.UnmarshalStrict(data, allow); err != nil {
		return nil, fmt.Errorf("%s: expected an allowlist (skipSteps, skipConditions, delegateConditions): %w", what, err)
	}
	return &SignedAllowlist{Allow: allow, Digest: digest, KeyID: k.ID}, nil
}

// SignAllowlist signs the allowlist file path with s and writes the
// signature to path+".sig"; the file must be an allowlist.
func SignAllowlist(path string, s *sign.Signer) (sigFile string, err error) {
	data, err := bounded.ReadFileAs("allowlist", path, MaxAllowlistSize)
	if err != nil {
		return "", err
	}
	if err := yaml.UnmarshalStrict(data, &v1alpha1.ExpansionAllow{}); err != nil {
		return "", fmt.Errorf("allowlist %s: expected an allowlist (skipSteps, skipConditions, delegateConditions): %w", path, err)
	}
	sig, err := s.Sign(bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("allowlist %s: %w", path, err)
	}
	sigFile = path + sign.SigExt
	tmp := sigFile + ".tmp"
	if err := os.WriteFile(tmp, sig, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, sigFile); err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return strings.TrimSpace(sigFile), nil
}
