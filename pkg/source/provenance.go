package source

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/internal/bounded"
)

// maxKeyring bounds a PGP keyring file.
const maxKeyring = 4 << 20

// maxProvenance bounds a chart's provenance file.
const maxProvenance = 1 << 20

// LoadKeyring reads a PGP keyring (binary, as gpg --export writes it, or
// armored), bounded, holding at least one key.
func LoadKeyring(file string) (openpgp.EntityList, error) {
	b, err := bounded.ReadFileAs("keyring", file, maxKeyring)
	if err != nil {
		return nil, err
	}
	var ring openpgp.EntityList
	if bytes.Contains(b, []byte("-----BEGIN PGP")) {
		ring, err = openpgp.ReadArmoredKeyRing(bytes.NewReader(b))
	} else {
		ring, err = openpgp.ReadKeyRing(bytes.NewReader(b))
	}
	if err != nil {
		return nil, fmt.Errorf("keyring %s is not a PGP keyring: %w", file, err)
	}
	if len(ring) == 0 {
		return nil, fmt.Errorf("keyring %s holds no key", file)
	}
	return ring, nil
}

// verifyProvenance checks a chart archive's provenance file under opts' trust
// policy, as Helm checks it: signed by a key of
// opts.Keyring, giving the sha256 of the archive named filename. Without a
// keyring nothing is checked; without a provenance file the chart is refused
// only when opts.ProvenanceRequired. what names the chart (chart NAME VERSION
// from SOURCE) for the error.
func verifyProvenance(what string, archive, prov []byte, filename string, opts HTTPOptions) error {
	if opts.Keyring == "" {
		return nil
	}
	if prov == nil {
		if opts.ProvenanceRequired {
			return fmt.Errorf("%s has no provenance file (%s.prov), and the source requires one signed by a key of %s", what, filename, opts.Keyring)
		}
		return nil
	}
	ring, err := LoadKeyring(opts.Keyring)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := checkProvenance(ring, archive, prov, filename); err != nil {
		if errors.Is(err, pgperrors.ErrUnknownIssuer) {
			return fmt.Errorf("%s: its provenance file is signed by key %s, which is not in the keyring %s: refused", what, signer(prov), opts.Keyring)
		}
		return fmt.Errorf("%s: its provenance file does not verify with the keyring %s: %w", what, opts.Keyring, err)
	}
	return nil
}

// checkProvenance verifies a provenance file as `helm verify` does (Helm's
// pkg/provenance, which this package may not link: see test/archtest): a
// PGP clear-signed message, signed by a key of ring, whose second YAML document
// (after "...") gives files: {FILENAME: sha256:HEX} with the archive's sha256.
func checkProvenance(ring openpgp.EntityList, archive, prov []byte, filename string) error {
	block, _ := clearsign.Decode(prov)
	if block == nil {
		return errors.New("signature block not found")
	}
	if _, err := openpgp.CheckDetachedSignature(ring, bytes.NewReader(block.Bytes), block.ArmoredSignature.Body, &packet.Config{}); err != nil {
		return err
	}
	parts := bytes.Split(block.Plaintext, []byte("\n...\n"))
	if len(parts) < 2 {
		return errors.New("the signed message has no file checksums")
	}
	var sums struct {
		Files map[string]string `json:"files"`
	}
	if err := yaml.Unmarshal(parts[1], &sums); err != nil {
		return fmt.Errorf("the signed file checksums: %w", err)
	}
	want, ok := sums.Files[filename]
	if !ok {
		return fmt.Errorf("it gives no sha256 for a file named %q", filename)
	}
	if got := "sha256:" + sha256Hex(archive); want != got {
		return fmt.Errorf("it gives %s for %s, but the archive's is %s", want, filename, got)
	}
	return nil
}

// signer names the key that signed a provenance file: its key ID in hex, or
// "(unknown)" when the signature does not say.
func signer(prov []byte) string {
	block, _ := clearsign.Decode(prov)
	if block == nil || block.ArmoredSignature == nil {
		return "(unknown)"
	}
	r := packet.NewReader(block.ArmoredSignature.Body)
	for {
		p, err := r.Next()
		if err != nil {
			return "(unknown)"
		}
		if s, ok := p.(*packet.Signature); ok {
			if s.IssuerFingerprint != nil {
				return fmt.Sprintf("%X", s.IssuerFingerprint)
			}
			if s.IssuerKeyId != nil {
				return fmt.Sprintf("%016X", *s.IssuerKeyId)
			}
			return "(unknown)"
		}
	}
}
