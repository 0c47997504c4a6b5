package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
)

// Referrer is an artifact attached to a manifest: one blob of its own media type.
type Referrer struct {
	// Manifest is the referrer manifest's descriptor (its digest, artifact type
	// and annotations).
	Manifest ocispec.Descriptor
}

// Resolve returns the manifest descriptor a reference names, oci://HOST/REPO:TAG or
// …@sha256:HEX.
func (c *Client) Resolve(ctx context.Context, ref string) (ocispec.Descriptor, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if r.Reference == "" {
		return ocispec.Descriptor{}, fmt.Errorf("%s: name a tag or a digest", ref)
	}
	repo, err := c.repo(r)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	d, err := repo.Resolve(ctx, r.Reference)
	if err != nil {
		return ocispec.Descriptor{}, describe(r, err)
	}
	return d, nil
}

// PushReferrer attaches blob (of mediaType) to the manifest subject names as an
// artifact of artifactType: a manifest whose subject is that manifest. Registries with
// the OCI 1.1 referrers API index it themselves; for the others the referrers index
// tagged sha256-HEX is updated, as the distribution spec's fallback says.
func (c *Client) PushReferrer(ctx context.Context, subject, artifactType, mediaType string, blob []byte, annotations map[string]string) (ocispec.Descriptor, error) {
	r, err := ParseRef(subject)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	repo, err := c.repo(r)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	sub, err := repo.Resolve(ctx, r.Reference)
	if err != nil {
		return ocispec.Descriptor{}, describe(r, err)
	}
	layer := content.NewDescriptorFromBytes(mediaType, blob)
	if err := pushBlob(ctx, repo, layer, blob); err != nil {
		return ocispec.Descriptor{}, describe(r, err)
	}
	ann := map[string]string{ocispec.AnnotationCreated: "1970-01-01T00:00:00Z"}
	for k, v := range annotations {
		ann[k] = v
	}
	d, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, artifactType, oras.PackManifestOptions{
		Subject:             &sub,
		Layers:              []ocispec.Descriptor{layer},
		ManifestAnnotations: ann,
	})
	if err != nil {
		return ocispec.Descriptor{}, describe(r, err)
	}
	return d, nil
}

// Referrers lists the artifacts attached to the manifest subject names, only those of
// artifactType unless it is empty: at most MaxListEntries over MaxListPages pages,
// else an error wrapping ErrListTooLong.
func (c *Client) Referrers(ctx context.Context, subject, artifactType string) ([]ocispec.Descriptor, error) {
	r, err := ParseRef(subject)
	if err != nil {
		return nil, err
	}
	repo, err := c.repo(r)
	if err != nil {
		return nil, err
	}
	sub, err := repo.Resolve(ctx, r.Reference)
	if err != nil {
		return nil, describe(r, err)
	}
	var out []ocispec.Descriptor
	bound := listBound{what: "the referrers of " + subject}
	err = repo.Referrers(ctx, sub, artifactType, func(rs []ocispec.Descriptor) error {
		if err := bound.page(len(rs)); err != nil {
			return err
		}
		out = append(out, rs...)
		return nil
	})
	if errors.Is(err, ErrListTooLong) {
		return nil, err
	}
	if err != nil {
		return nil, describe(r, err)
	}
	return out, nil
}

// ReferrerBlob fetches the one blob of the referrer manifest d (as listed by
// Referrers) in the repository of subject, checked against its digests.
func (c *Client) ReferrerBlob(ctx context.Context, subject string, d ocispec.Descriptor) ([]byte, error) {
	r, err := ParseRef(subject)
	if err != nil {
		return nil, err
	}
	repo, err := c.repo(r)
	if err != nil {
		return nil, err
	}
	manData, err := fetchBlob(ctx, repo.Manifests(), d, maxManifest)
	if err != nil {
		return nil, describe(r, err)
	}
	man, err := decodeManifest(manData)
	if err != nil {
		return nil, fmt.Errorf("referrer %s: %w", d.Digest, err)
	}
	if len(man.Layers) != 1 {
		return nil, fmt.Errorf("referrer %s has %d blobs, want 1", d.Digest, len(man.Layers))
	}
	b, err := fetchBlob(ctx, repo, man.Layers[0], maxManifest)
	if err != nil {
		return nil, describe(r, err)
	}
	return bytes.Clone(b), nil
}
