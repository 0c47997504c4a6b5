package declarative

import (
	"context"
	"strconv"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/stage"
	"github.com/kubeplug/kubeplug/pkg/values"
)

// RenderDefaults renders every string of pkg's spec.values.defaults (keys
// included) as a template over .Cluster, and returns the rendered defaults: a
// default may name the cluster ("{{ .Cluster.Metadata.Name }}-logs"). The
// templates see cluster without its spec.plugins, so that no default can
// carry another plugin's values, and no .Values: the defaults are what
// .Values starts from. A failure is a fatal diagnostic at the default's line
// of plugin.yaml. pkg's own defaults are not modified.
func RenderDefaults(ctx context.Context, pkg *plugin.Package, cluster *v1alpha1.Cluster) (map[string]any, diag.List) {
	defs := values.DeepCopy(pkg.Defaults())
	if len(defs) == 0 {
		return defs, nil
	}
	var view *v1alpha1.Cluster
	if cluster != nil {
		c := *cluster
		c.Spec.Plugins = nil
		view = &c
	}
	r := &renderer{pkg: pkg, limits: newLimits(ctx)}
	ok := true
	out, _ := r.walk("/spec/values/defaults", defs, map[string]any{"Cluster": view}, &ok).(map[string]any)
	if !ok {
		return nil, r.l
	}
	return out, r.l
}

// RenderChecks renders every string of pkg's spec.validate as a template over
// what the plugin's contributions see at req (.Cluster, .Values, .Plugins), so
// that a check may wait for an object in the namespace a value names. A
// failure is a fatal diagnostic at the check's line of plugin.yaml, and then
// no checks are returned.
func RenderChecks(ctx context.Context, pkg *plugin.Package, req *stage.Request) ([]v1alpha1.Check, diag.List) {
	src := pkg.Manifest.Spec.Validate
	if len(src) == 0 {
		return nil, nil
	}
	r := &renderer{pkg: pkg, req: req, limits: newLimits(ctx)}
	data := r.data(req.Values, nil)
	out := make([]v1alpha1.Check, len(src))
	ok := true
	for i, c := range src {
		if !r.renderInto("/spec/validate/"+strconv.Itoa(i), c, &out[i], data) {
			ok = false
		}
	}
	if !ok {
		return nil, r.l
	}
	return out, r.l
}
