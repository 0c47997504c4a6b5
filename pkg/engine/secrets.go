package engine

import (
	"encoding/json"
	"sync"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/redact"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/values"
)

// planSecrets is what a plan knows about sensitive values, computed once.
type planSecrets struct {
	once sync.Once
	// all holds every plugin's sensitive values; own each plugin's own.
	all *redact.Secrets
	own map[string]*redact.Secrets
	// cluster is the cluster spec as plugins see it: every plugin's sensitive
	// values masked, wherever in the file they appear.
	cluster *v1alpha1.Cluster
}

// Secrets returns every sensitive value of the plan's plugins: the values at each
// plugin's spec.values.sensitive pointers, cluster-level and per pool. Text from
// plugin code passes through it before kubeplug logs or prints it.
func (p *Plan) Secrets() *redact.Secrets {
	p.computeSecrets()
	return p.secrets.all
}

func (p *Plan) computeSecrets() {
	p.secrets.once.Do(func() {
		s := &p.secrets
		s.all = redact.New()
		s.own = map[string]*redact.Secrets{}
		sensitive := map[string][]string{}
		for _, pl := range p.Plugins {
			if pl.Values == nil {
				continue
			}
			own := redact.New(values.SensitiveValues(pl.Values.Cluster, pl.Values.Sensitive)...)
			for _, pv := range pl.Values.Pools {
				own.Add(values.SensitiveValues(pv, pl.Values.Sensitive)...)
			}
			s.own[pl.Package.Name] = own
			s.all.Add(own.Values()...)
			sensitive[pl.Package.Name] = pl.Values.Sensitive
		}
		if p.Cluster == nil || p.Cluster.Spec == nil {
			return
		}
		s.cluster = redactCluster(p.Cluster.Spec, sensitive, s.all)
	})
}

// redactCluster returns a copy of spec with each enabled plugin's values (and pool
// values) redacted at its sensitive pointers, and then every sensitive value
// masked wherever else the file repeats it.
func redactCluster(spec *v1alpha1.Cluster, sensitive map[string][]string, all *redact.Secrets) *v1alpha1.Cluster {
	b, err := json.Marshal(spec)
	if err != nil {
		return &v1alpha1.Cluster{APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.Metadata}
	}
	out := &v1alpha1.Cluster{}
	if err := json.Unmarshal([]byte(all.String(string(b))), out); err != nil {
		// Masking broke the document (it cannot, as masks replace whole JSON
		// string contents); show nothing rather than the secrets.
		return &v1alpha1.Cluster{APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.Metadata}
	}
	if out.Spec.Plugins == nil {
		return out
	}
	for i := range out.Spec.Plugins.Enabled {
		ref := &out.Spec.Plugins.Enabled[i]
		ptrs := sensitive[ref.Name]
		if len(ptrs) == 0 {
			continue
		}
		ref.Values = values.Redact(ref.Values, ptrs)
		for j := range ref.NodePools {
			ref.NodePools[j].Values = values.Redact(ref.NodePools[j].Values, ptrs)
		}
	}
	return out
}

// view returns what plugin p is shown of the cluster spec and the model: the
// redacted spec, and the model with the other plugins' sensitive values masked
// (its own stay, as it may have put them there).
func (p *Plan) view(pl *Planned, m *model.Model) (*v1alpha1.Cluster, *model.Model) {
	p.computeSecrets()
	cluster := p.secrets.cluster
	if cluster == nil && p.Cluster != nil {
		cluster = p.Cluster.Spec
	}
	others := p.secrets.all.Without(p.secrets.own[pl.Package.Name])
	if others.Len() == 0 {
		return cluster, m
	}
	clean, err := redact.JSON(others, m)
	if err != nil {
		// Fail closed: a plugin is better off without the model than with
		// another plugin's secrets.
		return cluster, model.New()
	}
	return cluster, clean
}

// addSecrets adds the sensitive values pl has now (after its code initialised
// values) to what the plan scrubs and masks.
func (p *Plan) addSecrets(pl *Planned) {
	p.computeSecrets()
	found := values.SensitiveValues(pl.Values.Cluster, pl.Values.Sensitive)
	for _, pv := range pl.Values.Pools {
		found = append(found, values.SensitiveValues(pv, pl.Values.Sensitive)...)
	}
	p.secrets.all.Add(found...)
	if own := p.secrets.own[pl.Package.Name]; own != nil {
		own.Add(found...)
	}
}
