package action

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kubeplug/kubeplug/pkg/check"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/model"
)

// runHelmTests runs, for the wave's plugins, the test hooks of each Helm
// release that asks for them (test: true), as `helm test` does, after the
// plugins' checks passed. Each release is one validate result, "helm test
// NS/NAME", listing its hooks' phases; a failed test is fatal as a failed check
// is.
func (lv *live) runHelmTests(ctx context.Context, wave []*engine.Planned, m *model.Model) diag.List {
	var results []check.Result
	for _, h := range m.Kubernetes.HelmReleases {
		if !h.Test || !slices.ContainsFunc(wave, func(pl *engine.Planned) bool { return pl.Package.Name == h.By }) {
			continue
		}
		start := time.Now()
		res, err := lv.deployer.TestRelease(ctx, h.Namespace, h.Name)
		var hooks []string
		for _, t := range res {
			hooks = append(hooks, fmt.Sprintf("%s %s %s", t.Kind, t.Hook, strings.ToLower(t.Phase)))
		}
		r := check.Result{Plugin: h.By, Name: "helm test " + h.Namespace + "/" + h.Name, OK: err == nil, Duration: time.Since(start)}
		switch {
		case err != nil:
			r.Message = err.Error()
		case len(hooks) == 0:
			r.Message = "the chart has no test hooks"
		default:
			r.Message = strings.Join(hooks, ", ")
		}
		results = append(results, r)
	}
	lv.res.Checks = append(lv.res.Checks, results...)
	return check.Diagnostics(results)
}
