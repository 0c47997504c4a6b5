package action

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/sign"
)

// Keygen writes a new signing key pair: PREFIX.key (mode 0600) and PREFIX.pub.
type Keygen struct {
	// Prefix is the path of both files without extension; "kubeplug" when empty.
	Prefix string
	// Password encrypts the private key; nil writes it unencrypted (for CI, where
	// the key file is itself kept secret).
	Password []byte
}

// KeygenResult is what [Keygen.Run] wrote.
type KeygenResult struct {
	PrivateKey string `json:"privateKey"`
	PublicKey  string `json:"publicKey"`
	KeyID      string `json:"keyID"`
	Encrypted  bool   `json:"encrypted"`
}

// Run generates the pair and writes both files; it never overwrites a file, and
// writes neither when either exists.
func (a *Keygen) Run(ctx context.Context) (*KeygenResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prefix := a.Prefix
	if prefix == "" {
		prefix = "kubeplug"
	}
	privPath, pubPath := prefix+".key", prefix+".pub"
	for _, p := range []string{privPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return nil, fmt.Errorf("%s exists: not overwriting a key; choose another --output-key-prefix or remove it", p)
		}
	}
	kp, err := sign.GenerateKeyPair(a.Password)
	if err != nil {
		return nil, err
	}
	pub, err := sign.LoadPublicKey(pubPath, kp.Public)
	if err != nil {
		return nil, err
	}
	if err := writeNew(privPath, kp.Private, 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(pubPath, kp.Public, 0o644); err != nil {
		_ = os.Remove(privPath)
		return nil, err
	}
	return &KeygenResult{PrivateKey: privPath, PublicKey: pubPath, KeyID: pub.ID, Encrypted: a.Password != nil}, nil
}

// writeNew creates name with data and mode, failing when it exists.
func writeNew(name string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("writing key: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		_ = os.Remove(name)
		return fmt.Errorf("writing key %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("writing key %s: %w", name, err)
	}
	return nil
}

// Sign writes the detached signature of a package archive (see package sign).
type Sign struct {
	// Key is the private key file.
	Key string
	// Password decrypts an encrypted key.
	Password []byte
	// Output is the signature file; ARCHIVE.sig when empty.
	Output string
	// Push, an oci://HOST/REPO/NAME:VERSION reference, also attaches the signature
	// to that artifact as an OCI referrer; the artifact must hold this very
	// archive. Registry is the client to use then.
	Push     string
	Registry *oci.Client
}

// SignatureArtifactType is the artifact type of a signature attached to a plugin
// artifact (see [sign.ArtifactType]).
const SignatureArtifactType = sign.ArtifactType

// SignResult says what was signed and where the signature went.
type SignResult struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	File      string `json:"file"`
	Digest    string `json:"digest"`
	Signature string `json:"signature"`
	KeyID     string `json:"keyID"`
	// Referrer is the digest of the signature artifact attached with Push.
	Referrer string `json:"referrer,omitempty"`
}

// Run checks that file is a valid package archive (as lint does: a package with
// fatal problems is not signed), signs its bytes and writes the signature.
func (a *Sign) Run(ctx context.Context, file string) (*SignResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
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
	data, pkg, err := readArchive(file)
	if err != nil {
		return nil, err
	}
	sig, err := s.Sign(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("signing %s: %w", file, err)
	}
	out := a.Output
	if out == "" {
		out = file + sign.SigExt
	}
	if err := writeFileAtomic(out, sig); err != nil {
		return nil, fmt.Errorf("writing signature of %s: %w", file, err)
	}
	res := &SignResult{Name: pkg.Name, Version: pkg.Version.String(), File: file, Digest: pkg.Digest, Signature: out, KeyID: s.KeyID()}
	if a.Push != "" {
		if a.Registry == nil {
			return nil, errors.New("signing with push: no registry client")
		}
		pulled, err := a.Registry.Pull(ctx, a.Push)
		if err != nil {
			return nil, fmt.Errorf("attaching the signature of %s: %w", file, err)
		}
		if !bytes.Equal(pulled.Archive, data) {
			return nil, fmt.Errorf("attaching the signature of %s to %s: the artifact holds another archive (plugin %s@%s, digest %s), not plugin %s@%s (digest %s); push this archive first",
				file, a.Push, pulled.Name, pulled.Version, pulled.Digest, pkg.Name, pkg.Version, pkg.Digest)
		}
		d, err := a.Registry.PushReferrer(ctx, a.Push, SignatureArtifactType, sign.MediaType, sig, map[string]string{oci.KeyIDAnnotation: s.KeyID()})
		if err != nil {
			return nil, fmt.Errorf("attaching the signature of %s to %s: %w", file, a.Push, err)
		}
		res.Referrer = d.Digest.String()
	}
	return res, nil
}

// readArchive reads a package archive whole and loads the package it holds.
func readArchive(file string) ([]byte, *plugin.Package, error) {
	data, err := readArchiveFile(file)
	if err != nil {
		return nil, nil, err
	}
	pkg, err := loadArchive(file, data)
	return data, pkg, err
}

// readArchiveFile reads a package archive's bytes, bounded by
// [plugin.MaxPackageSize] and refusing a FIFO or device.
func readArchiveFile(file string) ([]byte, error) {
	f, fi, err := bounded.OpenFile(file)
	switch {
	case errors.Is(err, bounded.ErrIsDir):
		return nil, fmt.Errorf("%s is a directory: expected a package archive (write one with kubeplug plugin package %s)", file, file)
	case err != nil:
		return nil, fmt.Errorf("cannot read the plugin archive %s: %w", file, err)
	}
	defer func() { _ = f.Close() }()
	if fi.Size() > plugin.MaxPackageSize {
		return nil, fmt.Errorf("cannot read the plugin archive %s: %w", file, &bounded.TooLargeError{Size: fi.Size(), Limit: plugin.MaxPackageSize})
	}
	data, err := bounded.Read(f, plugin.MaxPackageSize)
	if err != nil {
		return nil, fmt.Errorf("cannot read the plugin archive %s: %w", file, err)
	}
	return data, nil
}

func loadArchive(file string, data []byte) (*plugin.Package, error) {
	fsys, err := archive.Extract(bytes.NewReader(data), archive.Limits{})
	if err != nil {
		return nil, fmt.Errorf("plugin archive %s: %w", file, err)
	}
	return loadPackageFS(file, fsys)
}

func loadPackageFS(file string, fsys fs.FS) (*plugin.Package, error) {
	pkg, l := plugin.Load(fsys, plugin.OriginUser, filepath.Clean(file))
	if pkg == nil || l.HasFatal() {
		return nil, fmt.Errorf("plugin archive %s is not a valid package (run kubeplug plugin lint %s): %s", file, file, l.Fatal().String())
	}
	return pkg, nil
}

// Verify checks the detached signature of a package archive against trusted keys.
type Verify struct {
	// Keys are public key files; the signature must verify with one of them.
	Keys []string
	// Signature is the signature file; ARCHIVE.sig when empty.
	Signature string
	// Registry pulls an oci:// archive and its attached signatures.
	Registry *oci.Client
}

// VerifyResult says what verified, and with which key.
type VerifyResult struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	File      string `json:"file"`
	Digest    string `json:"digest"`
	Signature string `json:"signature"`
	Key       string `json:"key"`
	KeyID     string `json:"keyID"`
}

// Run verifies file. Every refusal names the archive, the plugin and version when
// the archive can be read, the signature file, and the keys that were tried.
func (a *Verify) Run(ctx context.Context, file string) (*VerifyResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(a.Keys) == 0 {
		return nil, errors.New("no trusted key: pass --key FILE.pub (once per key)")
	}
	keys := make([]*sign.PublicKey, 0, len(a.Keys))
	for _, k := range a.Keys {
		b, err := bounded.ReadFileAs("public key", k, bounded.MaxKeySize)
		if err != nil {
			return nil, err
		}
		pk, err := sign.LoadPublicKey(k, b)
		if err != nil {
			return nil, err
		}
		keys = append(keys, pk)
	}
	if strings.HasPrefix(file, "oci://") {
		return a.runOCI(ctx, file, keys)
	}
	data, err := readArchiveFile(file)
	if err != nil {
		return nil, err
	}
	// Name the plugin when the archive still reads as a package; a tampered one may not.
	what := "plugin archive " + file
	pkg, loadErr := loadArchive(file, data)
	if loadErr == nil {
		what = fmt.Sprintf("plugin %s@%s (archive %s, digest %s)", pkg.Name, pkg.Version, file, pkg.Digest)
	}
	sigFile := a.Signature
	if sigFile == "" {
		sigFile = file + sign.SigExt
	}
	sig, err := bounded.ReadFile(sigFile, bounded.MaxSignatureSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s is not signed: expected signature %s (write it with kubeplug plugin sign --key KEY %s)", what, sigFile, file)
	} else if err != nil {
		return nil, fmt.Errorf("%s: cannot read the signature %s: %w", what, sigFile, err)
	}
	k, err := sign.Verify(data, sig, keys...)
	if err != nil {
		return nil, fmt.Errorf("%s: signature %s: %w", what, sigFile, err)
	}
	// A signature over bytes that are not a valid package is still refused.
	if loadErr != nil {
		return nil, loadErr
	}
	return &VerifyResult{Name: pkg.Name, Version: pkg.Version.String(), File: file, Digest: pkg.Digest, Signature: sigFile, Key: k.Name, KeyID: k.ID}, nil
}

// runOCI verifies a pushed plugin: one of the signatures attached to ref must
// verify over the artifact's archive (Pull checks every blob against its digest
// and the package against the artifact's config).
func (a *Verify) runOCI(ctx context.Context, ref string, keys []*sign.PublicKey) (*VerifyResult, error) {
	if a.Registry == nil {
		return nil, errors.New("verifying " + ref + ": no registry client")
	}
	pulled, err := a.Registry.Pull(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("verifying %s: %w", ref, err)
	}
	what := fmt.Sprintf("plugin %s@%s (%s, digest %s)", pulled.Name, pulled.Version, ref, pulled.Digest)
	descs, err := a.Registry.Referrers(ctx, ref, SignatureArtifactType)
	if err != nil {
		return nil, fmt.Errorf("%s: listing signatures: %w", what, err)
	}
	if len(descs) == 0 {
		return nil, fmt.Errorf("%s is not signed: no %s artifact refers to it (attach one with kubeplug plugin sign --push)", what, SignatureArtifactType)
	}
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	try, skipped := oci.SignaturesToTry(descs, ids)
	var errs []error
	for _, d := range try {
		blob, err := a.Registry.ReferrerBlob(ctx, ref, d)
		if err != nil {
			errs = append(errs, fmt.Errorf("signature %s: %w", d.Digest, err))
			continue
		}
		k, err := sign.Verify(pulled.Archive, blob, keys...)
		if err != nil {
			errs = append(errs, fmt.Errorf("signature %s: %w", d.Digest, err))
			continue
		}
		return &VerifyResult{Name: pulled.Name, Version: pulled.Version, File: ref, Digest: pulled.Digest, Signature: d.Digest.String(), Key: k.Name, KeyID: k.ID}, nil
	}
	if skipped > 0 {
		errs = append(errs, fmt.Errorf("%d more signatures were not tried: at most %d are (those by a trusted key's ID first), of the %d attached", skipped, oci.MaxSignatures, len(descs)))
	}
	return nil, fmt.Errorf("%s: %w", what, errors.Join(errs...))
}
