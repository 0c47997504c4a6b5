package config

import (
	"strings"

	"github.com/kubeplug/kubeplug/pkg/source"
)

// ChartOptions returns how to reach and trust the source of a chart by
// reference: the CA file, registry config and provenance keyring of the
// cluster's plugin source for the same place
// (a catalog whose URL is the chart's Helm repository, or an oci:// catalog on
// the chart's registry), as for that catalog; the defaults when none is.
func (c *Cluster) ChartOptions(ref source.ChartRef) source.HTTPOptions {
	var opts source.HTTPOptions
	if c == nil || c.Spec.Spec.Plugins == nil {
		return opts
	}
	repoKey := func(u string) string {
		u = strings.TrimSuffix(u, "/")
		u = strings.TrimSuffix(u, "/"+source.IndexFile)
		return strings.TrimSuffix(u, "/")
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
		if s.CAFile != "" {
			opts.CAFiles = []string{c.path(s.CAFile)}
		}
		if s.RegistryConfig != "" {
			opts.RegistryConfig = c.path(s.RegistryConfig)
		}
		if s.Verify != nil && s.Verify.Keyring != "" {
			opts.Keyring, opts.ProvenanceRequired = c.path(s.Verify.Keyring), s.Verify.Required
		}
		return opts
	}
	return opts
}
