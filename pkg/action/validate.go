package action

import (
	"context"
	"strconv"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/values"
)

// ValidatedPlugin is one enabled plugin with its chosen version and redacted values.
type ValidatedPlugin struct {
	PluginInfo
	Values     map[string]any            `json:"values"`
	PoolValues map[string]map[string]any `json:"poolValues,omitempty"`
}

// ValidateResult describes a valid cluster file.
type ValidateResult struct {
	Cluster           string            `json:"cluster"`
	KubernetesVersion string            `json:"kubernetesVersion"`
	Plugins           []ValidatedPlugin `json:"plugins"`
}

// Validate checks a cluster file and every enabled plugin's values.
type Validate struct {
	cfg *Config
}

// NewValidate returns a Validate action.
func NewValidate(cfg *Config) *Validate { return &Validate{cfg: cfg} }

// Run checks cl (the file itself was checked when it was loaded): that every
// enabled plugin exists in a version matching its constraint, and every plugin's effective values
// against its schema (cluster-level and per node pool).
func (a *Validate) Run(ctx context.Context, cl *config.Cluster) (*ValidateResult, diag.List) {
	idx, l := a.cfg.LoadIndex(ctx, cl.Sources()...)
	res := &ValidateResult{Cluster: cl.Spec.Metadata.Name, KubernetesVersion: cl.KubernetesVersion.String()}
	for i, ref := range cl.Enabled() {
		ptr := "/spec/plugins/enabled/" + strconv.Itoa(i)
		ver, err := idx.Find(ref.Name, ref.Version)
		if err != nil {
			field := "/name"
			if len(idx.Versions(ref.Name)) > 0 {
				field = "/version"
			}
			cl.Errorf(&l, ptr+field, "%v", err)
			continue
		}
		pkg, fl := idx.Fetch(ctx, ver)
		l = append(l, fl...)
		if pkg == nil {
			continue
		}
		v, vl := cl.ValuesWith(i, pkg, config.ValuesOptions{Env: a.cfg.env(), AllowOutside: a.cfg.AllowValuesOutside})
		l = append(l, vl...)
		vp := ValidatedPlugin{PluginInfo: info(pkg), Values: v.Redacted()}
		vp.Enabled = true
		for pool, pv := range v.Pools {
			if vp.PoolValues == nil {
				vp.PoolValues = map[string]map[string]any{}
			}
			vp.PoolValues[pool] = values.Redact(pv, v.Sensitive)
		}
		res.Plugins = append(res.Plugins, vp)
	}
	l.Sort()
	return res, l
}
