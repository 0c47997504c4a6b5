package oci

import (
	"context"
	"fmt"
	"strings"
)

// Helm's OCI media types: a chart is an image manifest whose config is its
// Chart.yaml as JSON and whose layer is the chart's .tgz, optionally with its
// provenance file as a second layer.
const (
	ChartConfigMediaType     = "application/vnd.cncf.helm.config.v1+json"
	ChartContentMediaType    = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	ChartProvenanceMediaType = "application/vnd.cncf.helm.chart.provenance.v1.prov"
)

// PulledChart is a Helm chart fetched from a registry.
type PulledChart struct {
	// Ref is the reference pulled, Manifest the manifest's digest.
	Ref, Manifest string
	// Digest is the chart archive's sha256 ("sha256:HEX"), as its layer
	// descriptor names it (and as a Helm repository's index.yaml would).
	Digest string
	// Archive is the chart's .tgz; Provenance its .prov, when the artifact has one.
	Archive, Provenance []byte
}

// ChartTag is the tag a chart version is stored under: Helm replaces the '+'
// of build metadata, which tags cannot hold, by '_'.
func ChartTag(version string) string { return strings.ReplaceAll(version, "+", "_") }

// PullChart fetches the Helm chart oci://HOST/REPO/CHART:TAG (as `helm push`
// stores it) with every blob checked against its descriptor's digest and the
// archive bounded to limit bytes. It does not look inside the archive.
func (c *Client) PullChart(ctx context.Context, ref string, limit int64) (*PulledChart, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	if r.Reference == "" {
		return nil, fmt.Errorf("%s: name a version (…:VERSION)", ref)
	}
	repo, desc, man, err := c.fetchManifest(ctx, r, ref)
	if err != nil {
		return nil, err
	}
	if man.Config.MediaType != ChartConfigMediaType {
		return nil, fmt.Errorf("%s is not a Helm chart (its config is %q, not %s)", ref, man.Config.MediaType, ChartConfigMediaType)
	}
	out := &PulledChart{Ref: ref, Manifest: desc.Digest.String()}
	for _, l := range man.Layers {
		switch l.MediaType {
		case ChartContentMediaType:
			if out.Archive != nil {
				return nil, fmt.Errorf("%s: the artifact has two chart layers", ref)
			}
			if out.Archive, err = fetchBlob(ctx, repo, l, limit); err != nil {
				return nil, fmt.Errorf("%s: chart archive: %w", ref, describe(r, err))
			}
			out.Digest = l.Digest.String()
		case ChartProvenanceMediaType:
			if out.Provenance, err = fetchBlob(ctx, repo, l, maxManifest); err != nil {
				return nil, fmt.Errorf("%s: provenance: %w", ref, describe(r, err))
			}
		}
	}
	if out.Archive == nil {
		return nil, fmt.Errorf("%s is not a Helm chart: no layer of type %s", ref, ChartContentMediaType)
	}
	return out, nil
}
