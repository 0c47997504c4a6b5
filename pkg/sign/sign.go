package sign

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// SigExt is appended to an archive's file name to name its detached signature.
const SigExt = ".sig"

// ArtifactType is the OCI artifact type of a signature attached to a plugin
// artifact as a referrer; its one blob, of media type [MediaType], is the base64
// signature of the archive (the artifact's layer), as ARCHIVE.sig holds it.
const (
	ArtifactType = "application/vnd.kubeplug.plugin.signature.v1"
	MediaType    = "application/vnd.kubeplug.plugin.signature.v1+base64"
)

// Errors callers tell apart with errors.Is.
var (
	// ErrNoPassword is returned when a private key is encrypted and no password was
	// given, or when a key is to be encrypted without one.
	ErrNoPassword = errors.New("no password")
	// ErrBadPassword is returned when a password does not decrypt a private key.
	ErrBadPassword = errors.New("wrong password")
	// ErrBadKey is returned for a key file that holds no key this package uses.
	ErrBadKey = errors.New("not a signing key")
	// ErrBadSignature is returned for a signature that no trusted key verifies:
	// the data changed after signing, or another key signed it.
	ErrBadSignature = errors.New("signature does not verify")
	// ErrMalformedSignature is returned for a signature file that is not a
	// base64 signature.
	ErrMalformedSignature = errors.New("not a signature")
)

// KeyPair is a freshly generated key pair, PEM-encoded.
type KeyPair struct {
	// Private is the private key: encrypted with the password given to
	// [GenerateKeyPair], or unencrypted PKCS#8 when it was nil.
	Private []byte
	// Public is the public key to hand to those who verify.
	Public []byte
}

// GenerateKeyPair makes an ECDSA P-256 key pair. A non-nil password encrypts the
// private key (cosign's encrypted format); nil leaves it unencrypted, for CI where
// the file is itself a secret. An empty, non-nil password is refused.
func GenerateKeyPair(password []byte) (*KeyPair, error) {
	var pf cryptoutils.PassFunc
	if password != nil {
		if len(password) == 0 {
			return nil, fmt.Errorf("encrypting the private key: %w (the password is empty)", ErrNoPassword)
		}
		pf = func(bool) ([]byte, error) { return password, nil }
	}
	priv, pub, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), pf)
	if err != nil {
		return nil, fmt.Errorf("generating a key pair: %w", err)
	}
	return &KeyPair{Private: priv, Public: pub}, nil
}

// Encrypted reports whether a PEM private key is encrypted.
func Encrypted(privPEM []byte) bool {
	return bytes.Contains(privPEM, []byte("-----BEGIN ENCRYPTED "))
}

// Signer signs with one private key.
type Signer struct {
	sv *signature.ECDSASignerVerifier
	id string
}

// LoadSigner reads a PEM private key. password decrypts an encrypted key and is
// ignored for an unencrypted one.
func LoadSigner(privPEM, password []byte) (*Signer, error) {
	if Encrypted(privPEM) && len(password) == 0 {
		return nil, fmt.Errorf("the private key is encrypted: %w", ErrNoPassword)
	}
	pf := func(bool) ([]byte, error) { return password, nil }
	k, err := cryptoutils.UnmarshalPEMToPrivateKey(privPEM, pf)
	if err != nil {
		if Encrypted(privPEM) {
			return nil, fmt.Errorf("decrypting the private key: %w", ErrBadPassword)
		}
		return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: a %T, expected an ECDSA private key", ErrBadKey, k)
	}
	sv, err := signature.LoadECDSASignerVerifier(ec, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	id, err := KeyID(&ec.PublicKey)
	if err != nil {
		return nil, err
	}
	return &Signer{sv: sv, id: id}, nil
}

// KeyID is the signer's key ID (see [KeyID]).
func (s *Signer) KeyID() string { return s.id }

// Sign returns the detached signature of everything r holds: base64, as
// `cosign sign-blob` writes it, with a final newline.
func (s *Signer) Sign(r io.Reader) ([]byte, error) {
	raw, err := s.sv.SignMessage(r)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	return []byte(base64.StdEncoding.EncodeToString(raw) + "\n"), nil
}

// PublicKey is a trusted public key and the name it is known by in messages.
type PublicKey struct {
	// Name says where the key came from (a file name), for messages.
	Name string
	// ID is [KeyID] of the key.
	ID string
	v  *signature.ECDSAVerifier
}

// LoadPublicKey reads a PEM public key; name is used in messages.
func LoadPublicKey(name string, pubPEM []byte) (*PublicKey, error) {
	k, err := cryptoutils.UnmarshalPEMToPublicKey(pubPEM)
	if err != nil {
		return nil, fmt.Errorf("reading public key %s: %w: %w", name, ErrBadKey, err)
	}
	ec, ok := k.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("reading public key %s: %w: a %T, expected an ECDSA public key", name, ErrBadKey, k)
	}
	v, err := signature.LoadECDSAVerifier(ec, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("reading public key %s: %w: %w", name, ErrBadKey, err)
	}
	id, err := KeyID(ec)
	if err != nil {
		return nil, err
	}
	return &PublicKey{Name: name, ID: id, v: v}, nil
}

// KeyID names a public key in messages: "sha256:" and the first 16 hex digits of
// the SHA-256 of its DER encoding (SubjectPublicKeyInfo), which
// `openssl pkey -pubin -outform DER | sha256sum` reproduces.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := cryptoutils.MarshalPublicKeyToDER(pub)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:8]), nil
}

// Verify checks sig (as [Signer.Sign] writes it) over data against each key in
// turn and returns the first that verifies. With none it returns an error wrapping
// [ErrBadSignature] that names every key tried; for a signature that is not
// base64 it wraps [ErrMalformedSignature].
func Verify(data, sig []byte, keys ...*PublicKey) (*PublicKey, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(sig)))
	if err != nil || len(raw) == 0 {
		return nil, fmt.Errorf("%w: expected the base64 signature `kubeplug plugin sign` or `cosign sign-blob` writes", ErrMalformedSignature)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no trusted key given", ErrBadSignature)
	}
	tried := make([]string, 0, len(keys))
	for _, k := range keys {
		if k.v.VerifySignature(bytes.NewReader(raw), bytes.NewReader(data)) == nil {
			return k, nil
		}
		tried = append(tried, k.Name+" ("+k.ID+")")
	}
	return nil, fmt.Errorf("%w with any trusted key (tried %s): the archive changed after it was signed, or an unknown key signed it",
		ErrBadSignature, strings.Join(tried, ", "))
}
