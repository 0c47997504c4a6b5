package render

import (
	"context"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/model"
)

// ChartObject is one object a Helm release's chart renders, as render writes it
// (in its release's namespace, object patches applied).
type ChartObject struct {
	// Release is the model's release the chart was rendered for.
	Release model.HelmRelease
	// Template says which of the chart's templates the object came from, when
	// known (Helm's "# Source:" line).
	Template string
	Object   map[string]any
}

// ChartObjects renders the chart of every Helm release in the model with its
// values, as [Files] does, and returns the charts' objects in plugin then
// release order: for a caller that must see what a chart will create (the
// container images it references) before anything is deployed.
func ChartObjects(ctx context.Context, in Input) ([]ChartObject, diag.List) {
	r := &renderer{in: in, out: map[string][]byte{}}
	if !r.check() {
		return nil, r.diags
	}
	order, byPlugin := r.objects(ctx)
	if err := ctx.Err(); err != nil {
		r.fatalf("", "", "render cancelled: %v", err)
	}
	if r.diags.HasFatal() {
		return nil, r.diags
	}
	decoded := r.decode(order, byPlugin, func(o *kubeObject) bool { return o.release >= 0 })
	var out []ChartObject
	for _, p := range order {
		objs := decoded[p]
		i := 0
		for _, o := range byPlugin[p] {
			if o.release < 0 || i >= len(objs) {
				continue
			}
			tmpl := o.source // "helm release NS/NAME, TEMPLATE" or "TEMPLATE"
			if _, t, ok := strings.Cut(tmpl, ", "); ok && strings.HasPrefix(tmpl, "helm release ") {
				tmpl = t
			}
			out = append(out, ChartObject{Release: in.Model.Kubernetes.HelmReleases[o.release], Template: tmpl, Object: objs[i]})
			i++
		}
	}
	return out, r.diags
}
