package action

import (
	"context"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/values"
)

// PluginDetail is everything kubeplug knows about one plugin version. Values are
// redacted.
type PluginDetail struct {
	PluginInfo
	// Manifest is plugin.yaml with sensitive defaults redacted.
	Manifest *v1alpha1.Plugin `json:"manifest"`
	// Values are the effective cluster-level values: the defaults, or, for a cluster
	// file that enables the plugin, the merged values.
	Values map[string]any `json:"values"`
	// PoolValues are the per-pool values when the cluster scopes the plugin to pools.
	PoolValues map[string]map[string]any `json:"poolValues,omitempty"`
	// Shadowed lists lower-precedence packages of the same name hidden by this one.
	Shadowed []string `json:"shadowed,omitempty"`
}

// Show describes one plugin.
type Show struct {
	cfg *Config
	// Cluster, when set, adds the cluster spec's sources and computes its values.
	Cluster *config.Cluster
}

// NewShow returns a Show action.
func NewShow(cfg *Config) *Show { return &Show{cfg: cfg} }

// Run shows NAME or NAME@VERSION (VERSION may be a constraint; the newest match wins).
func (a *Show) Run(ctx context.Context, ref string) (*PluginDetail, diag.List) {
	name, constraint, _ := strings.Cut(ref, "@")
	cl, idx, l := a.cfg.loadFor(ctx, a.Cluster)
	if idx == nil {
		return nil, l
	}
	// Shadowing warnings belong to plugin list; show reports only what breaks it.
	l = l.Fatal()
	v, err := idx.Find(name, constraint)
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	pkg, fl := idx.Fetch(ctx, v)
	l = append(l, fl...)
	if pkg == nil {
		l.Sort()
		return nil, l
	}
	d := &PluginDetail{PluginInfo: info(pkg), Manifest: redactManifest(pkg)}
	d.Values = values.Redact(pkg.Defaults(), pkg.Sensitive())
	for _, s := range idx.Shadowed {
		if s.Name == pkg.Name {
			d.Shadowed = append(d.Shadowed, s.ID()+" ("+s.Origin.Name+", "+s.Location+")")
		}
	}
	if cl != nil {
		for i, r := range cl.Enabled() {
			if r.Name != pkg.Name {
				continue
			}
			d.Enabled = true
			v, vl := cl.ValuesWith(i, pkg, config.ValuesOptions{Env: a.cfg.env(), AllowOutside: a.cfg.AllowValuesOutside})
			l = append(l, vl...)
			d.Values = v.Redacted()
			for pool, pv := range v.Pools {
				if d.PoolValues == nil {
					d.PoolValues = map[string]map[string]any{}
				}
				d.PoolValues[pool] = values.Redact(pv, v.Sensitive)
			}
		}
	}
	l.Sort()
	return d, l
}

func info(p *plugin.Package) PluginInfo {
	return PluginInfo{
		Name: p.Name, Version: p.Version.String(), Origin: p.Origin.Name, Location: p.Location,
		Digest: p.Digest, Description: p.Manifest.Metadata.Description, SignedBy: p.SignedBy,
	}
}

func redactManifest(p *plugin.Package) *v1alpha1.Plugin {
	m := *p.Manifest
	if m.Spec.Values != nil {
		vs := *m.Spec.Values
		vs.Defaults = values.Redact(vs.Defaults, vs.Sensitive)
		m.Spec.Values = &vs
	}
	return &m
}
