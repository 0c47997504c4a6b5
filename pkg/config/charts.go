package config

import (
	"net/url"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/source"
)

// ChartOptions returns how to reach and trust the source of a chart by
// reference: the CA file, registry config and provenance keyring of the
// cluster's plugin source for the same place
// (a catalog whose URL is the chart's Helm repository, or an oci:// catalog on
// the chart's registry), as for that catalog, and the repository's URL as that
// source gives it (with its credentials, user:password@, which a plugin's
// repo may not carry); the defaults and "" when none is.
func (c *Cluster) ChartOptions(ref source.ChartRef) (opts source.HTTPOptions, repoURL string) {
	if c == nil || c.Spec.Spec.Plugins == nil {
		return opts, ""
	}
	// A repository is the same without its credentials, index.yaml or a
	// trailing slash.
	repoKey := func(raw string) string {
		if u, err := url.Parse(raw); err == nil {
			u.User = nil
			raw = u.String()
		}
		raw = strings.TrimSuffix(raw, "/")
		raw = strings.TrimSuffix(raw, "/"+source.IndexFile)
		return strings.TrimSuffix(raw, "/")
	}
	registry := func(u string) string {
		host, _, _ := strings.Cut(strings.TrimPrefix(u, "oci://"), "/")
		return host
	}
	for _, s := range c.Spec.Spec.Plugins.Sources {
		if s.Catalog == "" {
			continue
		}
		same := false
		if ref.Repo != "" {
			same = !strings.HasPrefix(s.Catalog, "oci://") && repoKey(s.Catalog) == repoKey(ref.Repo)
		} else {
			same = strings.HasPrefix(s.Catalog, "oci://") && registry(s.Catalog) == registry(ref.Chart)
		}
		if !same {
			continue
		}
		opts = c.catalogOptions(s)
		if ref.Repo != "" {
			// Read it as the catalog is read: with the source's credentials.
			repoURL = strings.TrimSuffix(strings.TrimSuffix(s.Catalog, "/"+source.IndexFile), "/")
		}
		return opts, repoURL
	}
	return opts, ""
}
