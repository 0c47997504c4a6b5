package action

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/lock"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/render"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// Charts by reference. A Helm release may name its chart by reference (an OCI
// chart, or a chart of a Helm repository at a version constraint) rather than by
// a path in its plugin's package. After each stage, fetchCharts resolves and
// fetches every such chart the model names that the run has not fetched yet,
// into the digest-addressed cache, and checks it against kubeplug.lock: a pinned
// chart is preferred (as a pinned plugin version is), one whose archive changed
// under the pinned version is refused naming both digests, and with --locked a
// chart the lock does not pin as resolved is refused. Render reads the fetched
// archives (renderInput), and the lock file pins them beside the plugin.

// chartKey is how the lock names a release's chart: its reference without version.
func chartKey(h model.HelmRelease) string {
	if h.Repo != "" {
		return strings.TrimSuffix(h.Repo, "/") + "/" + h.Chart
	}
	return h.Chart
}

// fetched is the run's charts by reference, by plugin and release reference
// (model.HelmRelease.ChartRef).
type fetched map[string]map[string]*source.Chart

func (f fetched) get(h model.HelmRelease) *source.Chart { return f[h.By][h.ChartRef()] }

// fetchCharts fetches the charts by reference that r.model's Helm releases name,
// and the dependencies with an https:// or oci:// repository that their charts
// (vendored or fetched) declare and do not hold, that the run has not fetched yet.
func (r *run) fetchCharts(ctx context.Context) diag.List {
	var l diag.List
	if r.model == nil {
		return l
	}
	if r.charts == nil {
		r.charts = fetched{}
		r.deps = map[string]map[string]depResult{}
		r.depsDone = map[string]bool{}
	}
	f := &source.ChartFetcher{Cache: source.DefaultCache(), Options: r.cluster.ChartOptions}
	for _, h := range r.model.Kubernetes.HelmReleases {
		if !h.IsRef() || r.charts.get(h) != nil {
			continue
		}
		field := "kubernetes.helmReleases." + h.Namespace + "/" + h.Name
		ref := source.ChartRef{Repo: h.Repo, Chart: h.Chart, Version: h.Version}
		ch, err := r.fetchChart(ctx, f, h.By, ref, chartKey(h))
		if err != nil {
			l.Errorf(h.By, 0, 0, field, "release %s/%s: %v", h.Namespace, h.Name, err)
			continue
		}
		if r.charts[h.By] == nil {
			r.charts[h.By] = map[string]*source.Chart{}
		}
		r.charts[h.By][h.ChartRef()] = ch
	}
	for _, h := range r.model.Kubernetes.HelmReleases {
		if done := h.By + "\x00" + h.Namespace + "/" + h.Name + "\x00" + h.Chart + "\x00" + h.Version; !r.depsDone[done] {
			r.depsDone[done] = true
			r.fetchDependencies(ctx, f, h)
		}
	}
	return l
}

// depResult is a dependency fetched for a plugin's chart, or why it was not.
type depResult struct {
	chart *source.Chart
	err   error
	// key is the dependency's key in the lock (depRef).
	key string
}

// depKey keys a dependency: its repository, name and version as asked for.
func depKey(d *chartv2.Dependency) string {
	return strings.TrimSuffix(d.Repository, "/") + "/" + d.Name + "@" + d.Version
}

// depRef is a dependency as a chart by reference, and its key in the lock.
func depRef(d *chartv2.Dependency) (source.ChartRef, string) {
	repo := strings.TrimSuffix(d.Repository, "/")
	if strings.HasPrefix(repo, "oci://") {
		return source.ChartRef{Chart: repo + "/" + d.Name, Version: d.Version}, repo + "/" + d.Name
	}
	return source.ChartRef{Repo: repo, Chart: d.Name, Version: d.Version}, repo + "/" + d.Name
}

// fetchDependencies walks h's chart as render will, fetching the dependencies it
// lacks into r.deps. A chart that does not load is left to render to report,
// with what a fetch failed of in r.deps.
func (r *run) fetchDependencies(ctx context.Context, f *source.ChartFetcher, h model.HelmRelease) {
	fetch := func(d *chartv2.Dependency) ([]byte, error) {
		key := depKey(d)
		if res, ok := r.deps[h.By][key]; ok {
			if res.err != nil {
				return nil, res.err
			}
			return res.chart.Archive, nil
		}
		ref, lockKey := depRef(d)
		ch, err := r.fetchChart(ctx, f, h.By, ref, lockKey)
		if r.deps[h.By] == nil {
			r.deps[h.By] = map[string]depResult{}
		}
		r.deps[h.By][key] = depResult{chart: ch, err: err, key: lockKey}
		if err != nil {
			return nil, err
		}
		return ch.Archive, nil
	}
	if h.IsRef() {
		if ch := r.charts.get(h); ch != nil {
			_, _ = render.LoadChartArchive(ch.Archive, fetch)
		}
		return
	}
	for _, pl := range r.plan.Plugins {
		if pl.Package.Name == h.By && pl.Package.FS != nil {
			_, _ = render.LoadChart(pl.Package.FS, h.Chart, fetch)
		}
	}
}

// fetchChart fetches ref for plugin, preferring the version kubeplug.lock pins
// for key (unless the run updates the plugin), and checks the result against
// the pin: an archive changed under the pinned version is refused, and with
// --locked so is a chart the lock does not pin at the version resolved.
func (r *run) fetchChart(ctx context.Context, f *source.ChartFetcher, plugin string, ref source.ChartRef, key string) (*source.Chart, error) {
	var pin *source.ChartPin
	pinned, havePin := r.lock.Chart(plugin, key)
	if havePin && !r.cfg.UpdateAll && !slices.Contains(r.cfg.Update, plugin) {
		pin = &source.ChartPin{Version: pinned.Version, Digest: pinned.Digest}
	}
	r.log().Debug("fetching chart", "plugin", plugin, "chart", ref.String())
	ch, err := f.Fetch(ctx, ref, pin)
	if err != nil {
		return nil, err
	}
	if havePin && pinned.Version == ch.Version && pinned.Digest != ch.Digest {
		return nil, fmt.Errorf("plugin %s: chart %s %s from %s has digest %s, but %s pins %s: the chart changed under the same version; if that is intended, run kubeplug lock --update %s",
			plugin, ch.Name, ch.Version, ref.Source(), ch.Digest, lock.FileName, pinned.Digest, plugin)
	}
	if r.cfg.Locked && (!havePin || pinned.Version != ch.Version) {
		was := "does not pin it"
		if havePin {
			was = "pins " + pinned.Version
		}
		return nil, fmt.Errorf("the lock file would change (--locked): plugin %s: chart %s resolves to %s, and %s %s; run 'kubeplug lock' and commit it",
			plugin, key, ch.Version, lock.FileName, was)
	}
	return ch, nil
}

// chartDependency is render's Input.ChartDependency: what fetchDependencies
// fetched (or why it could not).
func (r *run) chartDependency(h model.HelmRelease, d *chartv2.Dependency) ([]byte, error) {
	res, ok := r.deps[h.By][depKey(d)]
	switch {
	case !ok:
		return nil, fmt.Errorf("dependency %s was not fetched", depKey(d))
	case res.err != nil:
		return nil, res.err
	}
	return res.chart.Archive, nil
}

// remoteChart is render's Input.RemoteChart: the archive fetchCharts fetched.
func (r *run) remoteChart(h model.HelmRelease) ([]byte, error) {
	if ch := r.charts.get(h); ch != nil {
		return ch.Archive, nil
	}
	return nil, fmt.Errorf("chart %s of plugin %s was not fetched", h.ChartRef(), h.By)
}

// chartPins are the lock's chart pins of the run, by plugin.
func (r *run) chartPins() map[string][]lock.Chart {
	out := map[string][]lock.Chart{}
	if r.model == nil {
		return out
	}
	seen := map[string]bool{}
	add := func(plugin, key string, ch *source.Chart) {
		if ch == nil || seen[plugin+"\x00"+key] {
			return
		}
		seen[plugin+"\x00"+key] = true
		out[plugin] = append(out[plugin], lock.Chart{Chart: key, Version: ch.Version, Digest: ch.Digest})
	}
	for _, h := range r.model.Kubernetes.HelmReleases {
		add(h.By, chartKey(h), r.charts.get(h))
	}
	for _, plugin := range slices.Sorted(maps.Keys(r.deps)) {
		for _, k := range slices.Sorted(maps.Keys(r.deps[plugin])) {
			add(plugin, r.deps[plugin][k].key, r.deps[plugin][k].chart)
		}
	}
	return out
}

// chartsDoc adds the run's charts by reference to doc's plugins.
func chartsDoc(r *run, doc *engine.PlanDoc) {
	pins := r.chartPins()
	for i := range doc.Plugins {
		for _, c := range pins[doc.Plugins[i].Name] {
			doc.Plugins[i].Charts = append(doc.Plugins[i].Charts, engine.PlanChart(c))
		}
	}
}

// staleChartPins refuses, with --locked, chart pins of kubeplug.lock that the
// run's releases no longer use (a release dropped or its chart changed), as a
// change of the lock file; run once every stage that names charts has run.
func (r *run) staleChartPins() diag.List {
	var l diag.List
	if !r.cfg.Locked || r.lock == nil || r.plan == nil {
		return l
	}
	used := r.chartPins()
	for _, pl := range r.plan.Plugins {
		e, ok := r.lock.Entry(pl.Package.Name)
		if !ok || e.Version != pl.Package.Version.String() {
			continue // a plugin change, which the resolution already refused
		}
		for _, c := range e.Charts {
			if !slices.ContainsFunc(used[pl.Package.Name], func(u lock.Chart) bool { return u.Chart == c.Chart }) {
				l.Errorf(lock.PathFor(r.cluster.File), 0, 0, "", "the lock file would change (--locked): plugin %s: chart %s %s would be removed, as no release uses it; run 'kubeplug lock' and commit it",
					pl.Package.Name, c.Chart, c.Version)
			}
		}
	}
	return l
}
