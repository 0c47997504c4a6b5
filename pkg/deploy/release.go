package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/pkg/deploy/helm"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/state"
)

// ErrDowngrade is returned when a plugin's new version is lower than the installed
// one and nothing allows the downgrade.
var ErrDowngrade = errors.New("downgrade refused")

// contentDigest identifies what a unit would apply: its objects (by the digest
// stamped on each) and its Helm releases' charts and values.
func contentDigest(u Unit) string {
	lines := make([]string, 0, len(u.Objects)+len(u.Releases))
	for _, o := range u.Objects {
		lines = append(lines, kube.RefOf(o).Key()+" "+o.GetAnnotations()[AnnotationDigest])
	}
	for _, h := range u.Releases {
		lines = append(lines, "helm "+h.Namespace+"/"+h.Name+" "+helm.ChartDigest(h.Chart)+" "+helm.ValuesDigest(h.Values))
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// older reports whether version a is lower than b; versions that do not parse are
// not ordered.
func older(a, b string) bool {
	va, err1 := semver.NewVersion(a)
	vb, err2 := semver.NewVersion(b)
	return err1 == nil && err2 == nil && va.LessThan(vb)
}

// downgrade refuses moving from the installed record to version, unless
// Options.AllowDowngrade or the installed version declared it safe.
func (d *Deployer) downgrade(installed *Record, plugin, version string) error {
	if installed == nil || !older(version, installed.Version) || d.opts.AllowDowngrade || installed.AllowDowngrade {
		return nil
	}
	return fmt.Errorf("%w: plugin %s %s is installed (revision %d) and %s is older; nothing was changed. "+
		"Apply with --allow-downgrade if %s can run on what %s left in the cluster "+
		"(or %s %s's plugin.yaml declares spec.upgrade.allowDowngrade: true)",
		ErrDowngrade, plugin, installed.Version, installed.Revision, version, version, installed.Version, plugin, installed.Version)
}

// CheckDowngrade returns an ErrDowngrade error when version is lower than the
// plugin's installed version and nothing allows it, without changing anything.
func (d *Deployer) CheckDowngrade(ctx context.Context, plugin, version string) error {
	return d.CheckDowngrades(ctx, map[string]string{plugin: version})
}

// CheckDowngrades is CheckDowngrade for several plugins (name → version) at once,
// with one read of the records; the error joins one per refused plugin.
func (d *Deployer) CheckDowngrades(ctx context.Context, versions map[string]string) error {
	recs, err := d.Inventories(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range recs {
		if v, ok := versions[r.Plugin]; ok {
			if err := d.downgrade(r, r.Plugin, v); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func unitReleases(u Unit) []ReleaseRef {
	if u.rollback != nil {
		return slices.Clone(u.rollback.Releases)
	}
	return releaseRefs(u.Releases)
}

// begin decides which revision an apply of u records and writes it, Applying, with
// old ∪ new as its inventory, before anything is applied. Nothing is written when
// the newest revision is Ready with the same version, package, values and content
// (same is then true and rec is a copy of old): a re-apply is no new revision. A
// revision whose apply failed or was interrupted is retried in place when the
// content is the same; anything else is a new revision.
func (d *Deployer) begin(ctx context.Context, u Unit, old *Record) (rec *Record, same bool, err error) {
	if old != nil && old.Legacy {
		// Stored as revision 1 in the store's own form before it is built on.
		if err := d.store.Write(ctx, old, nil); err != nil {
			return nil, false, err
		}
	}
	digest := contentDigest(u)
	rels := unitReleases(u)
	if u.rollback != nil {
		digest = u.rollback.ContentDigest
	}
	sameContent := old != nil && u.rollback == nil && old.ContentDigest == digest && old.Version == u.Version &&
		old.PackageDigest == u.Digest && old.ValuesDigest == u.ValuesDigest
	widened := kube.Union(old.Inventory(), kube.RefsOf(u.Objects))
	widenedRels := unionReleases(old.HelmReleases(), rels)
	if sameContent && old.Phase == PhaseReady && len(widened) == len(old.Objects) && len(widenedRels) == len(old.Releases) {
		return old.Clone(), true, nil
	}
	rec = &Record{
		Plugin: u.Plugin, Revision: 1, Version: u.Version, PackageDigest: u.Digest, ValuesDigest: u.ValuesDigest,
		ContentDigest: digest, AllowDowngrade: u.AllowDowngrade, Requires: u.Requires,
		Objects: widened, Releases: widenedRels, Phase: PhaseApplying,
		Description: u.description, Started: time.Now().UTC().Round(time.Second),
	}
	switch {
	case old == nil:
		if rec.Description == "" {
			rec.Description = "install " + u.Version
		}
	case sameContent:
		rec.Revision, rec.HelmRevisions = old.Revision, old.HelmRevisions
		if rec.Description == "" {
			rec.Description = old.Description
		}
	default:
		rec.Revision = old.Revision + 1
		if rec.Description == "" {
			rec.Description = describe(old, u)
		}
	}
	objs := u.Objects
	if objs == nil {
		objs = []*unstructured.Unstructured{} // recorded too: a plugin of Helm releases only can be rolled back
	}
	if err := d.store.Write(ctx, rec, objs); err != nil {
		return nil, false, err
	}
	return rec, false, nil
}

// describe says what moving from old to u is.
func describe(old *Record, u Unit) string {
	switch {
	case older(old.Version, u.Version):
		return "upgrade " + old.Version + " to " + u.Version
	case older(u.Version, old.Version):
		return "downgrade " + old.Version + " to " + u.Version
	case old.ValuesDigest != u.ValuesDigest:
		return "apply " + u.Version + ": values changed"
	case old.PackageDigest != u.Digest:
		return "apply " + u.Version + ": package changed"
	}
	return "apply " + u.Version + ": content changed"
}

// finish narrows the revision to what the plugin now has and marks it Ready. An
// unchanged re-apply writes nothing unless its result differs from the record.
func (d *Deployer) finish(ctx context.Context, u Unit, rec *Record, same bool, all []ObjRef, done []*helm.Done) error {
	next := rec.Clone()
	next.Objects = kube.Union(nil, all)
	next.Releases = unitReleases(u)
	next.HelmRevisions = nil
	for _, r := range done {
		if v := r.Revision(); v != 0 {
			if next.HelmRevisions == nil {
				next.HelmRevisions = map[string]int{}
			}
			next.HelmRevisions[r.Ref().String()] = v
		}
	}
	next.Phase, next.Message = PhaseReady, ""
	if same && slices.Equal(next.Objects, rec.Objects) && slices.Equal(next.Releases, rec.Releases) &&
		maps.Equal(next.HelmRevisions, rec.HelmRevisions) && rec.Phase == PhaseReady && rec.Message == "" {
		return nil
	}
	next.Finished = time.Now().UTC().Round(time.Second)
	return d.store.Write(ctx, next, nil)
}

// failed marks the revision an apply recorded Failed with the cause, and with
// Options.RollbackOnFailure restores the plugin's previous Ready revision, or
// uninstalls the plugin when it had none; the error says what was done.
func (d *Deployer) failed(ctx context.Context, wave int, u Unit, hist []*Record, rec *Record, same bool, cause error, msg string) error {
	// Record the failure even when ctx is done: a record that says Applying lies.
	wctx := context.WithoutCancel(ctx)
	if err := d.setPhase(wctx, rec.Clone(), PhaseFailed, msg); err != nil {
		d.opts.Logger.Warn("could not record a failed apply", "plugin", u.Plugin, "error", err)
	}
	if !d.opts.RollbackOnFailure || u.rollback != nil || same || ctx.Err() != nil {
		return cause
	}
	var prev *Record
	for _, r := range slices.Backward(hist) {
		if r.Revision < rec.Revision && r.Phase == PhaseReady {
			prev = r
			break
		}
	}
	what := ""
	var err error
	switch {
	case prev != nil && len(prev.Chunks) > 0:
		what = fmt.Sprintf("rolled plugin %s back to revision %d (%s)", u.Plugin, prev.Revision, prev.Version)
		_, err = d.rollbackTo(ctx, wave, prev, fmt.Sprintf("rollback to %d: revision %d failed", prev.Revision, rec.Revision))
	case prev != nil:
		return fmt.Errorf("%w; not rolled back: revision %d of %s recorded no objects", cause, prev.Revision, u.Plugin)
	case !slices.ContainsFunc(hist, func(r *Record) bool { return r.Phase == PhaseReady }):
		// New, or never ready since it was installed.
		what = fmt.Sprintf("uninstalled plugin %s, which was new", u.Plugin)
		cur, _, rerr := state.Latest(wctx, d.store, u.Plugin)
		if rerr == nil && cur != nil {
			_, err = d.remove(ctx, cur)
		} else {
			err = rerr
		}
	default:
		// Ready revisions exist, but only newer ones (this run retried an older
		// revision in place): nothing earlier to go back to.
		return fmt.Errorf("%w; not rolled back: %s has no Ready revision before %d", cause, u.Plugin, rec.Revision)
	}
	if err != nil {
		return fmt.Errorf("%w; automatic rollback failed: %w", cause, err)
	}
	return fmt.Errorf("%w; %s", cause, what)
}

// Rollback restores a recorded revision of a plugin (0: the newest Ready revision
// before the current one): it applies the objects that revision applied, prunes
// what it did not have, rolls the plugin's Helm releases back to the revisions it
// recorded, waits until everything is ready and records a new revision, "rollback
// to N". It returns that revision.
func (d *Deployer) Rollback(ctx context.Context, plugin string, revision int) (*Record, error) {
	cur, hist, err := state.Latest(ctx, d.store, plugin)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, fmt.Errorf("plugin %s is not installed in this cluster", plugin)
	}
	var target *Record
	for _, r := range slices.Backward(hist) {
		if revision == 0 && r.Revision < cur.Revision && r.Phase == PhaseReady || revision != 0 && r.Revision == revision {
			target = r
			break
		}
	}
	if target == nil {
		have := make([]string, 0, len(hist))
		for _, r := range hist {
			have = append(have, fmt.Sprint(r.Revision))
		}
		if revision == 0 {
			return nil, fmt.Errorf("plugin %s has no Ready revision before its current one (%d) to roll back to; revisions: %s", plugin, cur.Revision, strings.Join(have, ", "))
		}
		return nil, fmt.Errorf("plugin %s has no revision %d; kubeplug keeps %d, it has: %s", plugin, revision, d.opts.HistoryMax, strings.Join(have, ", "))
	}
	return d.rollbackTo(ctx, 0, target, fmt.Sprintf("rollback to %d", target.Revision))
}

// rollbackTo applies a recorded revision as a new revision described by desc.
func (d *Deployer) rollbackTo(ctx context.Context, wave int, target *Record, desc string) (*Record, error) {
	objs, err := d.store.Objects(ctx, target)
	if err != nil {
		return nil, err
	}
	u := Unit{
		Plugin: target.Plugin, Version: target.Version, Digest: target.PackageDigest, ValuesDigest: target.ValuesDigest,
		AllowDowngrade: target.AllowDowngrade, Requires: target.Requires, Objects: objs, rollback: target, description: desc,
	}
	if _, err := d.ApplyWave(ctx, wave, []Unit{u}); err != nil {
		return nil, err
	}
	cur, _, err := state.Latest(ctx, d.store, target.Plugin)
	if err != nil {
		return nil, err
	}
	return cur, nil
}

// Revision is one entry of a plugin's history.
type Revision struct {
	Revision int    `json:"revision"`
	Version  string `json:"version"`
	// Values is the values digest, shortened.
	Values      string        `json:"values,omitempty"`
	Status      string        `json:"status"`
	Started     time.Time     `json:"started,omitzero"`
	Duration    time.Duration `json:"duration,omitempty"`
	Description string        `json:"description,omitempty"`
	Message     string        `json:"message,omitempty"`
	Objects     int           `json:"objects"`
}

// History returns a plugin's recorded revisions, oldest first. A Ready revision a
// later one replaced is Superseded; an Applying one that is not the newest (its run
// died) is Interrupted. It returns an empty list when the plugin is not installed.
func (d *Deployer) History(ctx context.Context, plugin string) ([]Revision, error) {
	recs, err := d.store.History(ctx, plugin)
	if err != nil {
		return nil, err
	}
	out := make([]Revision, 0, len(recs))
	for i, r := range recs {
		st := r.Phase
		if i < len(recs)-1 {
			switch st {
			case PhaseReady:
				st = PhaseSuperseded
			case PhaseApplying:
				st = PhaseInterrupted
			}
		}
		v := strings.TrimPrefix(r.ValuesDigest, "sha256:")
		if len(v) > 12 {
			v = v[:12]
		}
		rev := Revision{Revision: r.Revision, Version: r.Version, Values: v, Status: st, Started: r.Started, Description: r.Description, Message: r.Message, Objects: len(r.Objects)}
		if !r.Finished.IsZero() && !r.Started.IsZero() {
			rev.Duration = r.Finished.Sub(r.Started)
		}
		out = append(out, rev)
	}
	return out, nil
}

// setPhase rewrites the head of a revision with a new phase and message.
func (d *Deployer) setPhase(ctx context.Context, r *Record, phase, msg string) error {
	r.Phase, r.Message, r.Finished = phase, msg, time.Now().UTC().Round(time.Second)
	return d.store.Write(ctx, r, nil)
}

func releaseRefs(rels []HelmRelease) []ReleaseRef {
	out := make([]ReleaseRef, 0, len(rels))
	for _, r := range rels {
		out = append(out, ReleaseRef{Namespace: r.Namespace, Name: r.Name})
	}
	return kube.SortReleaseRefs(out)
}

// unionReleases returns a ∪ b, sorted.
func unionReleases(a, b []ReleaseRef) []ReleaseRef {
	out := slices.Clone(a)
	for _, r := range b {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return kube.SortReleaseRefs(out)
}
