package oci

import (
	"context"
	"errors"
	"fmt"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
)

// Media types and tag of a catalog's index artifact.
const (
	IndexArtifactType = "application/vnd.kubeplug.catalog.index.v1"
	IndexMediaType    = "application/vnd.kubeplug.catalog.index.v1+json"
	// IndexTag tags the index in the repository PREFIX itself; the plugins are the
	// repositories PREFIX/NAME, so no plugin name can collide with it.
	IndexTag = "index"
	// MaxIndexSize bounds an index read from a registry.
	MaxIndexSize = 64 << 20
)

// FetchIndex returns the catalog index (JSON, see source.CatalogIndex) stored under the
// prefix oci://HOST/PREFIX, checked against its digests; found is false when the
// prefix has no index yet.
func (c *Client) FetchIndex(ctx context.Context, prefix string) (data []byte, found bool, err error) {
	r, err := ParseRef(prefix)
	if err != nil {
		return nil, false, err
	}
	if r.Reference != "" {
		return nil, false, fmt.Errorf("%s: a catalog is a repository prefix, without a tag or digest", prefix)
	}
	r.Reference = IndexTag
	repo, err := c.repo(r)
	if err != nil {
		return nil, false, err
	}
	desc, rc, err := repo.FetchReference(ctx, IndexTag)
	if errors.Is(err, errdef.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, describe(r, err)
	}
	manData, err := readVerified(rc, desc, maxManifest)
	if err != nil {
		return nil, false, fmt.Errorf("%s: index manifest: %w", r, err)
	}
	man, err := decodeManifest(manData)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", r, err)
	}
	if man.ArtifactType != IndexArtifactType || len(man.Layers) != 1 || man.Layers[0].MediaType != IndexMediaType {
		return nil, false, fmt.Errorf("%s is not a kubeplug catalog index (artifact type %q)", r, man.ArtifactType)
	}
	b, err := fetchBlob(ctx, repo, man.Layers[0], MaxIndexSize)
	if err != nil {
		return nil, false, fmt.Errorf("%s: index: %w", r, describe(r, err))
	}
	return b, true, nil
}

// PushIndex stores data (a catalog index as JSON) as the index of the prefix
// oci://HOST/PREFIX, replacing the one there.
func (c *Client) PushIndex(ctx context.Context, prefix string, data []byte) (ocispec.Descriptor, error) {
	r, err := ParseRef(prefix)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if r.Reference != "" {
		return ocispec.Descriptor{}, fmt.Errorf("%s: a catalog is a repository prefix, without a tag or digest", prefix)
	}
	r.Reference = IndexTag
	repo, err := c.repo(r)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	layer := content.NewDescriptorFromBytes(IndexMediaType, data)
	if err := pushBlob(ctx, repo, layer, data); err != nil {
		return ocispec.Descriptor{}, describe(r, err)
	}
	d, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, IndexArtifactType, oras.PackManifestOptions{
		Layers:              []ocispec.Descriptor{layer},
		ManifestAnnotations: map[string]string{ocispec.AnnotationCreated: "1970-01-01T00:00:00Z"},
	})
	if err != nil {
		return ocispec.Descriptor{}, describe(r, err)
	}
	if err := repo.Tag(ctx, d, IndexTag); err != nil {
		return ocispec.Descriptor{}, describe(r, err)
	}
	return d, nil
}

// Tags lists the tags of the repository oci://HOST/REPO: at most MaxListEntries
// over MaxListPages pages, else an error wrapping ErrListTooLong.
func (c *Client) Tags(ctx context.Context, repository string) ([]string, error) {
	r, err := ParseRef(repository)
	if err != nil {
		return nil, err
	}
	repo, err := c.repo(r)
	if err != nil {
		return nil, err
	}
	var out []string
	bound := listBound{what: "the tags of " + repository}
	if err := repo.Tags(ctx, "", func(ts []string) error {
		if err := bound.page(len(ts)); err != nil {
			return err
		}
		out = append(out, ts...)
		return nil
	}); err != nil {
		if errors.Is(err, ErrListTooLong) {
			return nil, err
		}
		return nil, describe(r, err)
	}
	return out, nil
}

// Repositories lists the repositories directly under the prefix
// oci://HOST/PREFIX (PREFIX/NAME, not deeper) through the registry's catalog
// API (/v2/_catalog, which not every registry serves), as names NAME: at most
// MaxListEntries repositories of the whole registry over MaxListPages pages,
// else an error wrapping ErrListTooLong.
func (c *Client) Repositories(ctx context.Context, prefix string) ([]string, error) {
	r, err := ParseRef(prefix)
	if err != nil {
		return nil, err
	}
	reg, err := remote.NewRegistry(r.Registry)
	if err != nil {
		return nil, fmt.Errorf("invalid registry %s: %w", r.Registry, err)
	}
	reg.Client = c.http
	reg.PlainHTTP = c.plainHTTP(r.Registry)
	under := strings.TrimSuffix(r.Repository, "/") + "/"
	var out []string
	bound := listBound{what: "the repositories of registry " + r.Registry}
	// The catalog API lists in lexical order, so the listing starts right after
	// the prefix itself; the names are filtered all the same, as not every
	// registry honours the start (nor the order, to stop early).
	err = reg.Repositories(ctx, under, func(rs []string) error {
		if err := bound.page(len(rs)); err != nil {
			return err
		}
		for _, name := range rs {
			if rest, ok := strings.CutPrefix(name, under); ok && rest != "" && !strings.Contains(rest, "/") {
				out = append(out, rest)
			}
		}
		return nil
	})
	switch {
	case err == nil:
		return out, nil
	case errors.Is(err, ErrListTooLong):
		return nil, err
	}
	return nil, describe(r, err)
}
