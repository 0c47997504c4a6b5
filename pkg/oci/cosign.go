package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/errdef"
)

// cosign's signature layout in a registry (sigstore/cosign's "tag" scheme): the
// signatures of the manifest sha256:HEX are the layers of the image manifest
// tagged sha256-HEX.sig in the same repository, each a simple-signing payload
// whose signature is the layer's annotation.
const (
	CosignSignatureAnnotation = "dev.cosignproject.cosign/signature"
	CosignPayloadMediaType    = "application/vnd.dev.cosign.simplesigning.v1+json"
	// MaxCosignSignatures bounds the signature layers read for one manifest.
	MaxCosignSignatures = MaxSignatures
	maxCosignPayload    = 64 << 10
)

// CosignSignature is one signature cosign attached to a manifest: Signature
// (base64, as the annotation holds it) is over Payload.
type CosignSignature struct {
	Payload   []byte
	Signature string
}

// CosignTag is the tag under which cosign stores the signatures of the
// manifest manifestDigest ("sha256:HEX").
func CosignTag(manifestDigest string) string {
	return strings.Replace(manifestDigest, ":", "-", 1) + ".sig"
}

// CosignSignatures returns the cosign signatures of the manifest
// manifestDigest in repository (oci://HOST/REPO), each layer's payload checked
// against its digest and bounded, at most MaxCosignSignatures; none (and no
// error) when the repository has no CosignTag for it. skipped counts the
// layers past the bound.
func (c *Client) CosignSignatures(ctx context.Context, repository, manifestDigest string) (sigs []CosignSignature, skipped int, err error) {
	ref := repository + ":" + CosignTag(manifestDigest)
	r, err := ParseRef(ref)
	if err != nil {
		return nil, 0, err
	}
	repo, _, man, err := c.fetchManifest(ctx, r, ref)
	if errors.Is(err, errdef.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	for _, l := range man.Layers {
		sig, ok := l.Annotations[CosignSignatureAnnotation]
		if !ok || l.MediaType != CosignPayloadMediaType {
			continue
		}
		if len(sigs) == MaxCosignSignatures {
			skipped++
			continue
		}
		payload, err := fetchBlob(ctx, repo, l, maxCosignPayload)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: signature payload %s: %w", ref, l.Digest, describe(r, err))
		}
		sigs = append(sigs, CosignSignature{Payload: payload, Signature: sig})
	}
	return sigs, skipped, nil
}

// CosignPayload is the simple-signing payload cosign signs for a manifest.
type CosignPayload struct {
	Critical struct {
		Identity struct {
			DockerReference string `json:"docker-reference"`
		} `json:"identity"`
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
	Optional map[string]any `json:"optional"`
}

// CosignPayloadType is the type every cosign simple-signing payload declares.
const CosignPayloadType = "cosign container image signature"

// NewCosignPayload is the payload `cosign sign` signs for the manifest
// manifestDigest of the repository HOST/REPO (without oci://).
func NewCosignPayload(repository, manifestDigest string) []byte {
	var p CosignPayload
	p.Critical.Identity.DockerReference = strings.TrimPrefix(repository, Scheme)
	p.Critical.Image.DockerManifestDigest = manifestDigest
	p.Critical.Type = CosignPayloadType
	b, _ := json.Marshal(p) // plain strings: cannot fail
	return b
}

// CheckCosignPayload checks that a signed payload is cosign's and names the
// manifest manifestDigest: a signature of another manifest (a signature tag
// copied over) is refused.
func CheckCosignPayload(payload []byte, manifestDigest string) error {
	var p CosignPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return fmt.Errorf("the signed payload is not cosign's simple-signing JSON: %w", err)
	}
	if p.Critical.Type != CosignPayloadType {
		return fmt.Errorf("the signed payload is of type %q, not %q", p.Critical.Type, CosignPayloadType)
	}
	if _, err := digest.Parse(p.Critical.Image.DockerManifestDigest); err != nil || p.Critical.Image.DockerManifestDigest != manifestDigest {
		return fmt.Errorf("the signature is of manifest %q, not of %s", p.Critical.Image.DockerManifestDigest, manifestDigest)
	}
	return nil
}
