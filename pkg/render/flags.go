package render

import (
	"context"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/model"
)

// flags reports every flag a plugin set on a control-plane component or a
// pool's kubelet that Input.Flag objects to (an unknown flag, an ill-typed
// value), at the plugin and the model's key of the flag, so that the caller
// can point it at the plugin's line. A kubelet flag contributed to several
// pools is reported once.
func (r *renderer) flags(context.Context) {
	if r.in.Flag == nil {
		return
	}
	check := func(component, field string, flags map[string]model.Setting[string], seen map[string]bool) {
		for _, name := range sortedKeys(flags) {
			s := flags[name]
			if s.By == "" || !flagRE.MatchString(name) {
				continue // set by render itself, or refused by its step
			}
			key := s.By + "\x00" + name + "\x00" + s.Value
			if seen[key] {
				continue
			}
			seen[key] = true
			msg, fatal := r.in.Flag(component, name, s.Value)
			if msg == "" {
				continue
			}
			sev := diag.Warning
			if fatal {
				sev = diag.Fatal
			}
			r.diags = append(r.diags, diag.Diagnostic{Severity: sev, Plugin: s.By, Field: field + "." + name,
				Message: "plugin " + s.By + ": " + msg})
		}
	}
	for _, name := range model.Components {
		if c := r.in.Model.ControlPlane.Components[name]; c != nil {
			check(name, "controlPlane."+name+".flags", c.Flags, map[string]bool{})
		}
	}
	seen := map[string]bool{}
	for _, pn := range sortedKeys(r.in.Model.Pools) {
		check("kubelet", "nodes."+pn+".kubelet.flags", r.in.Model.Pools[pn].Kubelet.Flags, seen)
	}
}

// CheckFlags checks the flags of the model as render does (Input.Flag),
// without rendering: plan runs it.
func CheckFlags(ctx context.Context, in Input) diag.List {
	if in.Model == nil {
		return nil
	}
	r := &renderer{in: in}
	r.flags(ctx)
	return r.diags
}
