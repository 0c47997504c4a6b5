package engine

import (
	"fmt"
	"maps"
	"slices"

	"github.com/kubeplug/kubeplug/internal/yamldoc"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/values"
)

// initialised merges vals, the values p's code returned at initialise, over
// p's values (cluster-level and each pool's), after checking the result
// against p's schema: a violation is a fatal diagnostic naming the plugin and
// the value, and leaves p's values as they were. The plan's view of p's
// values for the other plugins (.Plugins) and its secrets follow.
func (plan *Plan) initialised(p *Planned, vals map[string]any) diag.List {
	var l diag.List
	if len(vals) == 0 || p.Values == nil {
		return nil
	}
	merged := values.Merge(p.Values.Cluster, vals)
	pools := map[string]map[string]any{}
	for name, pv := range p.Values.Pools {
		pools[name] = values.Merge(pv, vals)
	}
	check := func(where string, v map[string]any) bool {
		if p.Package.Schema == nil {
			return true
		}
		ok := true
		for _, viol := range yamldoc.Check(p.Package.Schema, v) {
			msg := viol.Message
			if values.IsSensitive(viol.Pointer, p.Values.Sensitive) {
				msg = "value does not match the schema (sensitive, not shown)"
			}
			l = append(l, diag.Diagnostic{Severity: diag.Fatal, Plugin: p.Package.Name, Field: "values" + viol.Pointer,
				Message: fmt.Sprintf("plugin %s: the values its code returned at initialise do not match its schema%s: values %s: %s (schema rule %s)", p.Package.Name, where, viol.Pointer, msg, viol.Rule)})
			ok = false
		}
		return ok
	}
	ok := check("", merged)
	for _, name := range sortedNames(pools) {
		ok = check(" (node pool "+name+")", pools[name]) && ok
	}
	if !ok {
		return l
	}
	p.Values.Cluster = merged
	if p.Values.Pools != nil {
		p.Values.Pools = pools
	}
	if plan.others != nil {
		others := maps.Clone(plan.others)
		pv := others[p.Package.Name]
		pv.Values = p.Values.Redacted()
		others[p.Package.Name] = pv
		plan.others = others
	}
	plan.addSecrets(p)
	return nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
