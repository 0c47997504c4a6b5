package action

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/lock"
	"github.com/kubeplug/kubeplug/pkg/model"
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

// fetchCharts fetches the charts by reference that r.model's Helm releases name
// and the run has not fetched yet.
func (r *run) fetchCharts(ctx context.Context) diag.List {
	var l diag.List
	if r.model == nil {
		return l
	}
	if r.charts == nil {
		r.charts = fetched{}
	}
	f := &source.ChartFetcher{Cache: source.DefaultCache(), Options: r.cluster.ChartOptions}
	for _, h := range r.model.Kubernetes.HelmReleases {
		if !h.IsRef() || r.charts.get(h) != nil {
			continue
		}
		field := "kubernetes.helmReleases." + h.Namespace + "/" + h.Name
		ref := source.ChartRef{Repo: h.Repo, Chart: h.Chart, Version: h.Version}
		key := chartKey(h)
		var pin *source.ChartPin
		pinned, havePin := r.lock.Chart(h.By, key)
		if havePin && !r.cfg.UpdateAll && !slices.Contains(r.cfg.Update, h.By) {
			pin = &source.ChartPin{Version: pinned.Version, Digest: pinned.Digest}
		}
		r.log().Debug("fetching chart", "plugin", h.By, "chart", ref.String())
		ch, err := f.Fetch(ctx, ref, pin)
		if err != nil {
			l.Errorf(h.By, 0, 0, field, "release %s/%s: %v", h.Namespace, h.Name, err)
			continue
		}
		lockFile := ""
		if r.cluster != nil && r.cluster.File != "" {
			lockFile = lock.PathFor(r.cluster.File)
		}
		if havePin && pinned.Version == ch.Version && pinned.Digest != ch.Digest {
			l.Errorf(lockFile, 0, 0, "", "plugin %s: chart %s %s from %s has digest %s, but %s pins %s: the chart changed under the same version; if that is intended, run kubeplug lock --update %s",
				h.By, ch.Name, ch.Version, ref.Source(), ch.Digest, lock.FileName, pinned.Digest, h.By)
			continue
		}
		if r.cfg.Locked && (!havePin || pinned.Version != ch.Version) {
			was := "does not pin it"
			if havePin {
				was = "pins " + pinned.Version
			}
			l.Errorf(lockFile, 0, 0, "", "the lock file would change (--locked): plugin %s: chart %s resolves to %s, and %s %s; run 'kubeplug lock -f %s' and commit it",
				h.By, key, ch.Version, lock.FileName, was, r.cluster.File)
			continue
		}
		if r.charts[h.By] == nil {
			r.charts[h.By] = map[string]*source.Chart{}
		}
		r.charts[h.By][h.ChartRef()] = ch
	}
	return l
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
	for _, h := range r.model.Kubernetes.HelmReleases {
		ch := r.charts.get(h)
		if ch == nil || seen[h.By+"\x00"+chartKey(h)] {
			continue
		}
		seen[h.By+"\x00"+chartKey(h)] = true
		out[h.By] = append(out[h.By], lock.Chart{Chart: chartKey(h), Version: ch.Version, Digest: ch.Digest})
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
