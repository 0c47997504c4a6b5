package action

import (
	"cmp"
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

// Resources returns the API resources of every object the installed plugins
// own (their newest release records), sorted: what a caller watches to see
// those objects change — the dashboard's live view. A kind the cluster no
// longer serves is left out.
func (a *Status) Resources(ctx context.Context) ([]schema.GroupVersionResource, diag.List) {
	var l diag.List
	d, err := connect(ctx, a.cfg, a.Target, deploy.Options{})
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	invs, err := d.Inventories(ctx)
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionResource
	for _, inv := range invs {
		for _, o := range inv.Objects {
			gvk := schema.GroupVersionKind{Group: o.Group, Version: o.Version, Kind: o.Kind}
			if seen[gvk] {
				continue
			}
			seen[gvk] = true
			m, err := d.Client().Mapping(gvk)
			if err != nil {
				continue // not served (any more): nothing of it to watch
			}
			if !slices.Contains(out, m.Resource) {
				out = append(out, m.Resource)
			}
		}
	}
	slices.SortFunc(out, func(x, y schema.GroupVersionResource) int {
		return cmp.Or(cmp.Compare(x.Group, y.Group), cmp.Compare(x.Resource, y.Resource), cmp.Compare(x.Version, y.Version))
	})
	return out, l
}
