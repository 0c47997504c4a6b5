package action

import (
	"context"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/check"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/expansion"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// stepClusterReady checks the provider's readiness conditions (up).
const stepClusterReady stepName = "cluster-ready"

// providerPlugin is the name the provider's readiness conditions are checked
// and reported under, as a plugin's checks are under the plugin's:
// "provider/dns-ready" is how an expansion names one.
const providerPlugin = "provider"

// clusterReadyStep checks the readiness conditions the cluster's provider
// declares (provider.Steps: the local provider's dns-ready) that apply to the
// model, once every plugin is deployed: each as a check of providerPlugin,
// left out when an expansion skips it (a warning says so) and replaced by a
// wait for the site operator's condition when one delegates it, as plugins'
// checks are (expansionChecks). A dry run checks nothing. Input: r.model,
// r.live.rest, r.exp. Output: the results in r.live.res.Checks.
var clusterReadyStep = step{stepClusterReady, func(ctx context.Context, r *run) diag.List {
	var l diag.List
	lv := &r.live
	if lv.dryRun {
		return l
	}
	var checks []v1alpha1.Check
	for _, c := range provider.StepsOf(r.cluster.Spec.Spec.Provider).Conditions {
		if c.Applies == nil || c.Applies(r.model) {
			checks = append(checks, c.Check)
		}
	}
	if r.exp != nil {
		var skipped []string
		checks, skipped, _ = r.exp.set.Checks(providerPlugin, checks)
		for _, msg := range skipped {
			l.Warnf("", 0, 0, "", "%s", msg)
		}
	}
	if len(checks) == 0 {
		return l
	}
	if err := lv.checkRunner(r, r.cluster.Spec.Metadata.Name); err != nil {
		l.Errorf("", 0, 0, "", "the provider's readiness conditions: %v", err)
		return l
	}
	res := lv.checks.Run(ctx, check.Plugin{Name: providerPlugin, Checks: checks})
	lv.res.Checks = append(lv.res.Checks, res...)
	return append(l, check.Diagnostics(res)...)
}}

// providerSteps is what an expansion may name of the provider spec selects:
// its steps, those a site may skip, its readiness conditions.
func providerSteps(spec *v1alpha1.Provider) expansion.ProviderSteps {
	name, _ := provider.NameOf(spec)
	s := provider.StepsOf(spec)
	return expansion.ProviderSteps{Provider: name, Steps: s.StepNames(), Skippable: s.SkippableNames(), Conditions: s.ConditionNames()}
}

// providerSkips is the provider's steps the run's expansions skip, for
// provider.Desired.Skip; nil without.
func (r *run) providerSkips() map[string]string {
	if r.exp == nil {
		return nil
	}
	return r.exp.set.ProviderSkips()
}
