package render

import (
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"

	"github.com/kubeplug/kubeplug/pkg/diag"
)

// CheckReleases checks each Helm release of the model without rendering it: its
// chart loads (every dependency present), and its values, over the chart's
// defaults, meet the chart's values.schema.json (and its subcharts'), the
// failing field's path named. plan runs it; render checks the same as it renders.
func CheckReleases(in Input) diag.List {
	r := &renderer{in: in}
	if in.Model == nil {
		return nil
	}
	for _, h := range in.Model.Kubernetes.HelmReleases {
		field := "kubernetes.helmReleases." + h.Namespace + "/" + h.Name
		chrt, err := r.loadChart(h)
		if err != nil {
			r.fatalf(h.By, field, "loading chart %s of plugin %s for release %s/%s: %v", h.Chart, h.By, h.Namespace, h.Name, err)
			continue
		}
		vals, err := copyValues(h.Values)
		if err != nil {
			r.fatalf(h.By, field, "copying values: %v", err)
			continue
		}
		coalesced, err := chartutil.CoalesceValues(chrt, vals)
		if err == nil {
			err = chartutil.ValidateAgainstSchema(chrt, coalesced)
		}
		if err != nil {
			r.fatalf(h.By, field, "values of release %s/%s for chart %s %s (%s): %v", h.Namespace, h.Name, chrt.Name(), chrt.Metadata.Version, h.Chart, err)
		}
	}
	return r.diags
}
