package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/sign"
)

// TrustPolicy says which keys sign a source's packages and whether a signature is
// required (cluster.yaml's spec.plugins.sources[].verify).
type TrustPolicy struct {
	// Keys are public key files; a signature must verify with one of them.
	Keys []string
	// Required refuses unsigned packages, and unpacked directories, which cannot be
	// signed. Without it unsigned packages pass, but a bad signature never does.
	Required bool
}

// Verified returns src with every fetched package checked against policy: a
// package archive's detached signature (ARCHIVE.sig, see package sign) must verify
// with one of the policy's keys, over the very bytes whose package is returned.
// Listing is left to src (metadata only); refusals are fatal diagnostics of Fetch
// naming plugin, version, source, signature and keys.
func Verified(src Source, name string, policy TrustPolicy) Source {
	return &verified{src: src, name: name, policy: policy}
}

type verified struct {
	src    Source
	name   string
	policy TrustPolicy
}

// String names the source in logs.
func (s *verified) String() string { return fmt.Sprint(s.src) }

// List implements [Source].
func (s *verified) List(ctx context.Context) ([]*Version, diag.List) { return s.src.List(ctx) }

// Fetch implements [Source].
func (s *verified) Fetch(ctx context.Context, v *Version) (*plugin.Package, diag.List) {
	pkg, l := s.src.Fetch(ctx, v)
	if pkg == nil || l.HasFatal() {
		return pkg, l
	}
	signer, err := s.check(ctx, v, pkg)
	if err != nil {
		l.Errorf(v.Location, 0, 0, "", "plugin %s from source %s: %v", v.ID(), s.name, err)
		return nil, l
	}
	if signer != nil {
		pkg.SignedBy = signer.Name + " (" + signer.ID + ")"
	}
	return pkg, l
}

// check verifies pkg's signature and returns the key it verified with; nil
// and no error when the package is unsigned and the policy allows that.
func (s *verified) check(ctx context.Context, v *Version, pkg *plugin.Package) (*sign.PublicKey, error) {
	keys := make([]*sign.PublicKey, 0, len(s.policy.Keys))
	for _, k := range s.policy.Keys {
		b, err := bounded.ReadFileAs("trusted key", k, bounded.MaxKeySize)
		if err != nil {
			return nil, err
		}
		pk, err := sign.LoadPublicKey(k, b)
		if err != nil {
			return nil, err
		}
		keys = append(keys, pk)
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Name + " (" + k.ID + ")"
	}
	if u, ok := v.Ref.(*url.URL); ok && u.Scheme+"://" == oci.Scheme {
		return s.checkOCI(ctx, pkg, u.String(), keys, names)
	}
	if !IsArchive(v.Location) {
		if s.policy.Required {
			return nil, fmt.Errorf("the source requires signatures by %s, but %s is an unpacked directory, which cannot be signed: package it (kubeplug plugin package), sign the archive and list the archive as the source",
				strings.Join(names, ", "), v.Location)
		}
		return nil, nil
	}
	sigFile := v.Location + sign.SigExt
	sig, err := bounded.ReadFile(sigFile, bounded.MaxSignatureSize)
	if errors.Is(err, fs.ErrNotExist) {
		if s.policy.Required {
			return nil, fmt.Errorf("not signed: the source requires a signature by %s, expected %s", strings.Join(names, ", "), sigFile)
		}
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("cannot read the signature %s: %w", sigFile, err)
	}
	data, err := bounded.ReadFileAs("plugin archive", v.Location, plugin.MaxPackageSize)
	if err != nil {
		return nil, err
	}
	signer, err := sign.Verify(data, sig, keys...)
	if err != nil {
		return nil, fmt.Errorf("signature %s: %w", sigFile, err)
	}
	return signer, sameDigest(data, pkg)
}

// sameDigest checks that the package returned is the one whose bytes verified, not
// an archive replaced in between (or a cached copy that differs).
func sameDigest(data []byte, pkg *plugin.Package) error {
	fsys, err := archive.Extract(bytes.NewReader(data), archive.Limits{})
	if err != nil {
		return fmt.Errorf("the signed archive: %w", err)
	}
	if d, err := plugin.Digest(fsys); err != nil || d != pkg.Digest {
		return fmt.Errorf("the archive changed while it was read: the signed bytes have digest %s, the package loaded %s", d, pkg.Digest)
	}
	return nil
}

// checkOCI verifies a package of an OCI catalog: a signature attached to its
// artifact (ref, by manifest digest) as a referrer of [sign.ArtifactType] must
// verify over the artifact's archive with one of keys. The registry must be
// reachable: a package from the cache alone cannot be verified.
func (s *verified) checkOCI(ctx context.Context, pkg *plugin.Package, ref string, keys []*sign.PublicKey, names []string) (*sign.PublicKey, error) {
	opts := HTTPOptions{Timeout: DefaultHTTPTimeout}
	if oc, ok := s.src.(*ociCatalog); ok {
		opts = oc.opts // its CA files and credentials
	}
	c, err := ociClientFor(ref, opts)
	if err != nil {
		return nil, err
	}
	descs, err := c.Referrers(ctx, ref, sign.ArtifactType)
	if err != nil {
		return nil, fmt.Errorf("listing the signatures of %s: %w", ref, err)
	}
	if len(descs) == 0 {
		if s.policy.Required {
			return nil, fmt.Errorf("not signed: the source requires a signature by %s, and no %s artifact refers to %s", strings.Join(names, ", "), sign.ArtifactType, ref)
		}
		return nil, nil
	}
	p, err := c.Pull(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("pulling %s to verify it: %w", ref, err)
	}
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	try, skipped := oci.SignaturesToTry(descs, ids)
	var errs []error
	for _, d := range try {
		blob, err := c.ReferrerBlob(ctx, ref, d)
		if err == nil {
			var signer *sign.PublicKey
			if signer, err = sign.Verify(p.Archive, blob, keys...); err == nil {
				return signer, sameDigest(p.Archive, pkg)
			}
		}
		errs = append(errs, fmt.Errorf("signature %s: %w", d.Digest, err))
	}
	if skipped > 0 {
		errs = append(errs, fmt.Errorf("%d more signatures were not tried: at most %d are (those by a trusted key's ID first), of the %d attached", skipped, oci.MaxSignatures, len(descs)))
	}
	return nil, errors.Join(errs...)
}
