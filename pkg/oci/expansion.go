package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
)

// Media types of an expansion artifact: an image manifest of artifact type
// [ExpansionArtifactType] whose config ([ExpansionConfigMediaType]) names the
// expansion, its version and its package digest, and whose one layer is the
// expansion's uncompressed tar archive ([ExpansionLayerMediaType]), as
// `kubeplug expansion create` writes it.
const (
	ExpansionArtifactType    = "application/vnd.kubeplug.expansion.v1"
	ExpansionConfigMediaType = "application/vnd.kubeplug.expansion.config.v1+json"
	ExpansionLayerMediaType  = "application/vnd.kubeplug.expansion.v1.tar"
)

// ExpansionConfig is an expansion artifact's config blob.
type ExpansionConfig struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Digest is the expansion's package digest (the SHA-256 of its
	// checksums.txt), not the layer's.
	Digest string `json:"digest"`
}

// PushedExpansion says what PushExpansion stored.
type PushedExpansion struct {
	Ref      string `json:"ref"`
	Manifest string `json:"manifest"`
	Layer    string `json:"layer"`
}

// PushExpansion stores the expansion archive file at ref (oci://HOST/REPO:TAG)
// as one layer, streamed from the file (it is hashed once first, never held in
// memory). The caller has opened and verified the archive and says what it is
// in cfg.
func (c *Client) PushExpansion(ctx context.Context, file, ref string, cfg ExpansionConfig) (*PushedExpansion, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	if r.Reference == "" {
		return nil, fmt.Errorf("%s: name a tag (…:TAG) to push the expansion to", ref)
	}
	if _, err := digest.Parse(r.Reference); err == nil {
		return nil, fmt.Errorf("%s: push to a tag, not a digest; the manifest's digest is printed once pushed", ref)
	}
	layer, err := fileDescriptor(file)
	if err != nil {
		return nil, err
	}
	layer.Annotations = map[string]string{ocispec.AnnotationTitle: filepath.Base(file)}
	repo, err := c.repo(r)
	if err != nil {
		return nil, err
	}
	cfgData, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cfgDesc := content.NewDescriptorFromBytes(ExpansionConfigMediaType, cfgData)
	if err := pushBlob(ctx, repo, cfgDesc, cfgData); err != nil {
		return nil, describe(r, err)
	}
	if ok, err := repo.Exists(ctx, layer); err != nil {
		return nil, describe(r, err)
	} else if !ok {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		err = repo.Push(ctx, layer, f)
		_ = f.Close()
		if err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
			return nil, describe(r, err)
		}
	}
	man, err := packAndTag(ctx, repo, ExpansionArtifactType, cfgDesc, layer, cfg.Name, cfg.Version, r.Reference)
	if err != nil {
		return nil, describe(r, err)
	}
	return &PushedExpansion{Ref: r.String(), Manifest: man.Digest.String(), Layer: layer.Digest.String()}, nil
}

// fileDescriptor hashes a file as a layer of ExpansionLayerMediaType.
func fileDescriptor(file string) (ocispec.Descriptor, error) {
	f, err := os.Open(file)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("%s: %w", file, err)
	}
	return ocispec.Descriptor{MediaType: ExpansionLayerMediaType, Digest: digest.Digest("sha256:" + hex.EncodeToString(h.Sum(nil))), Size: n}, nil
}

// PulledExpansion is an expansion fetched from a registry.
type PulledExpansion struct {
	ExpansionConfig
	// Ref is the reference pulled, Manifest the manifest's digest.
	Ref      string
	Manifest string
	// File is the archive written.
	File string
}

// PullExpansion fetches the expansion ref names into dir as NAME.tar, streamed
// to disk and checked against the layer's digest and size (at most limit
// bytes) before it is renamed into place: a damaged or cut download leaves no
// file. The archive is not opened: the caller opens and verifies it
// (expansion.Open, Verify) and compares its digest with the config's.
func (c *Client) PullExpansion(ctx context.Context, ref, dir string, limit int64) (*PulledExpansion, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	if r.Reference == "" {
		return nil, fmt.Errorf("%s: name a tag (…:TAG) or a manifest digest (…@sha256:HEX)", ref)
	}
	repo, desc, man, err := c.fetchManifest(ctx, r, ref)
	if err != nil {
		return nil, err
	}
	cfg, err := expansionConfig(ctx, repo, r, ref, man, limit)
	if err != nil {
		return nil, err
	}
	out, err := writeLayer(ctx, repo, man.Layers[0], dir, "expansion.tar")
	if err != nil {
		return nil, fmt.Errorf("%s: expansion layer %s: %w", ref, man.Layers[0].Digest, describe(r, err))
	}
	return &PulledExpansion{ExpansionConfig: *cfg, Ref: ref, Manifest: desc.Digest.String(), File: out}, nil
}

// expansionConfig checks that man is an expansion artifact whose layer is at
// most limit bytes, and reads its config.
func expansionConfig(ctx context.Context, repo content.Fetcher, r Ref, ref string, man *ocispec.Manifest, limit int64) (*ExpansionConfig, error) {
	if man.ArtifactType != ExpansionArtifactType || man.Config.MediaType != ExpansionConfigMediaType || len(man.Layers) != 1 || man.Layers[0].MediaType != ExpansionLayerMediaType {
		return nil, fmt.Errorf("%s is not a kubeplug expansion (artifact type %q, config %q, %d layers); push one with 'kubeplug expansion push EXPANSION.tar oci://HOST/REPO:TAG'",
			ref, man.ArtifactType, man.Config.MediaType, len(man.Layers))
	}
	if l := man.Layers[0]; l.Size < 0 || l.Size > limit {
		return nil, fmt.Errorf("%s: the expansion is %d bytes, past the limit of %d", ref, l.Size, limit)
	}
	if err := man.Layers[0].Digest.Validate(); err != nil {
		return nil, fmt.Errorf("%s: invalid layer digest %q: %w", ref, man.Layers[0].Digest, err)
	}
	cfgData, err := fetchBlob(ctx, repo, man.Config, maxManifest)
	if err != nil {
		return nil, fmt.Errorf("%s: config: %w", ref, describe(r, err))
	}
	var cfg ExpansionConfig
	if err := json.Unmarshal(cfgData, &cfg); err != nil {
		return nil, fmt.Errorf("%s: the config is not a kubeplug expansion config: %w", ref, err)
	}
	return &cfg, nil
}

// writeLayer streams the blob l into dir/name through a temporary file,
// renamed into place only once it is checked.
func writeLayer(ctx context.Context, repo content.Fetcher, l ocispec.Descriptor, dir, name string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".pull-*")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	err = fetchToFile(ctx, repo, l, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	return out, os.Rename(tmp.Name(), out)
}

// fetchToFile streams the blob d into w, checking its size and digest.
func fetchToFile(ctx context.Context, repo content.Fetcher, d ocispec.Descriptor, w io.Writer) error {
	rc, err := repo.Fetch(ctx, d)
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	v := d.Digest.Verifier()
	n, err := io.Copy(io.MultiWriter(w, v), io.LimitReader(rc, d.Size+1))
	if err != nil {
		return err
	}
	if n != d.Size {
		return fmt.Errorf("size mismatch: expected %d bytes, found %d", d.Size, n)
	}
	if !v.Verified() {
		return fmt.Errorf("digest mismatch: the content does not hash to %s", d.Digest)
	}
	return nil
}
