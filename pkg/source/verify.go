package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/diag"
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
	if err := s.check(v, pkg); err != nil {
		l.Errorf(v.Location, 0, 0, "", "plugin %s from source %s: %v", v.ID(), s.name, err)
		return nil, l
	}
	return pkg, l
}

func (s *verified) check(v *Version, pkg *plugin.Package) error {
	keys := make([]*sign.PublicKey, 0, len(s.policy.Keys))
	for _, k := range s.policy.Keys {
		b, err := os.ReadFile(k)
		if err != nil {
			return fmt.Errorf("reading trusted key: %w", unwrap(err))
		}
		pk, err := sign.LoadPublicKey(k, b)
		if err != nil {
			return err
		}
		keys = append(keys, pk)
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Name + " (" + k.ID + ")"
	}
	if !IsArchive(v.Location) {
		if s.policy.Required {
			return fmt.Errorf("the source requires signatures by %s, but %s is an unpacked directory, which cannot be signed: package it (kubeplug plugin package), sign the archive and list the archive as the source",
				strings.Join(names, ", "), v.Location)
		}
		return nil
	}
	sigFile := v.Location + sign.SigExt
	sig, err := os.ReadFile(sigFile)
	if errors.Is(err, fs.ErrNotExist) {
		if s.policy.Required {
			return fmt.Errorf("not signed: the source requires a signature by %s, expected %s", strings.Join(names, ", "), sigFile)
		}
		return nil
	} else if err != nil {
		return fmt.Errorf("reading signature: %w", unwrap(err))
	}
	data, err := os.ReadFile(v.Location)
	if err != nil {
		return fmt.Errorf("reading the archive: %w", unwrap(err))
	}
	if _, err := sign.Verify(data, sig, keys...); err != nil {
		return fmt.Errorf("signature %s: %w", sigFile, err)
	}
	// The package returned must be the one whose bytes verified, not an archive
	// replaced in between.
	fsys, err := archive.Extract(bytes.NewReader(data), archive.Limits{})
	if err != nil {
		return fmt.Errorf("the signed archive: %w", err)
	}
	if d, err := plugin.Digest(fsys); err != nil || d != pkg.Digest {
		return fmt.Errorf("the archive changed while it was read: the signed bytes have digest %s, the package loaded %s", d, pkg.Digest)
	}
	return nil
}
