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

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/pkg/deploy/helm"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/state"
	"github.com/kubeplug/kubeplug/pkg/serving"
)

// The release record of each unit of a wave: begun (old ∪ new) before anything
// is applied, finished (narrowed, Ready) after the prune, or failed.

// contentDigest identifies what a unit would apply: its objects (by the digest
// of each, digests) and its Helm releases' charts and values.
func contentDigest(u Unit, digests []string) string {
	lines := make([]string, 0, len(u.Objects)+len(u.Releases))
	for i, o := range u.Objects {
		lines = append(lines, kube.RefOf(o).Key()+" "+digests[i])
	}
	for _, h := range u.Releases {
		lines = append(lines, "helm "+h.Namespace+"/"+h.Name+" "+helm.ChartDigest(h.Chart)+" "+helm.ValuesDigest(h.Values))
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func unitReleases(u Unit) []ReleaseRef {
	if u.rollback != nil {
		return slices.Clone(u.rollback.Releases)
	}
	return releaseRefs(u.Releases)
}

// beginRecord decides which revision the apply of r's unit records and writes
// it, Applying, with old ∪ new as its inventory, before anything is applied.
// Nothing is written when the newest revision is Ready with the same version,
// package, values and content (r.same is then true and r.rec is a copy of r.old):
// a re-apply is no new revision. A revision whose apply failed or was interrupted
// is retried in place when the content is the same; anything else is a new
// revision.
func (w *wave) beginRecord(ctx context.Context, r *unitRun) error {
	d, u, old := w.d, r.unit, r.old
	if old != nil && old.Legacy {
		// Stored as revision 1 in the store's own form before it is built on.
		if err := d.store.Write(ctx, old, nil); err != nil {
			return err
		}
	}
	digest := contentDigest(u, r.digests)
	rels := unitReleases(u)
	if u.rollback != nil {
		digest = u.rollback.ContentDigest
	}
	same := sameContent(old, u, digest)
	widened := kube.Union(old.Inventory(), kube.RefsOf(u.Objects))
	widenedRels := unionReleases(old.HelmReleases(), rels)
	if same && old.Phase == PhaseReady && len(widened) == len(old.Objects) && len(widenedRels) == len(old.Releases) && old.Owner == d.opts.Owner {
		r.rec, r.same = old.Clone(), true
		return nil
	}
	rec := &Record{
		Plugin: u.Plugin, Revision: 1, Version: u.Version, PackageDigest: u.Digest, ValuesDigest: u.ValuesDigest,
		ContentDigest: digest, AllowDowngrade: u.AllowDowngrade, Requires: u.Requires, Owner: d.opts.Owner, Machine: u.Machine,
		Objects: widened, Releases: widenedRels, Phase: PhaseApplying,
		Description: u.description, Started: time.Now().UTC().Round(time.Second),
		Digests: keptDigests(r, old),
	}
	if u.rollback != nil && old != nil {
		rec.Owner = old.Owner // a rollback restores content, not who manages it
		rec.Machine = u.rollback.Machine
	}
	numberRevision(rec, old, u, same)
	objs := u.Objects
	if objs == nil {
		objs = []*unstructured.Unstructured{} // recorded too: a plugin of Helm releases only can be rolled back
	}
	if err := d.store.Write(ctx, rec, objs); err != nil {
		return err
	}
	r.rec = rec
	return nil
}

// sameContent says whether u, not a rollback, applies what old recorded:
// the same content, version, package, values and machine contributions.
func sameContent(old *Record, u Unit, digest string) bool {
	return old != nil && u.rollback == nil && old.ContentDigest == digest && old.Version == u.Version &&
		old.PackageDigest == u.Digest && old.ValuesDigest == u.ValuesDigest && slices.Equal(old.Machine, u.Machine)
}

// numberRevision gives rec its revision and description: 1 for an install,
// old's own when the content is the same (a failed or interrupted apply
// retried in place), the next one otherwise.
func numberRevision(rec, old *Record, u Unit, same bool) {
	switch {
	case old == nil:
		if rec.Description == "" {
			rec.Description = "install " + u.Version
		}
	case same:
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

// keptDigests is what of old's Digests the revision r's run records keeps
// while it applies: those of r's objects whose content it does not change. An
// object it applies anew has none until the revision is Ready (finishRecord),
// so that a run killed after applying it leaves no digest that claims content
// the object may not hold, nor one it may hold no longer: the next run applies
// it again.
func keptDigests(r *unitRun, old *Record) map[string]string {
	if old == nil || len(old.Digests) == 0 {
		return nil
	}
	out := map[string]string{}
	for i, o := range r.unit.Objects {
		key := kube.RefOf(o).Key()
		if d := old.Digests[key]; d != "" && d == r.digests[i] {
			out[key] = d
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// unitDigests are the digests to record for r's unit once its objects were all
// applied (or found as desired): each object's, by ObjRef key.
func unitDigests(r *unitRun) map[string]string {
	if len(r.unit.Objects) == 0 {
		return nil
	}
	out := make(map[string]string, len(r.unit.Objects))
	for i, o := range r.unit.Objects {
		out[kube.RefOf(o).Key()] = r.digests[i]
	}
	return out
}

// trustedVersions is what of old's ResourceVersions an apply of r's unit may
// trust (ssa.LiveObjects): those of its objects that versionable admits and
// whose recorded digest is that of the content desired now.
func trustedVersions(r *unitRun, old *Record) map[string]string {
	if old == nil || len(old.ResourceVersions) == 0 {
		return nil // an older kubeplug's record: every object is read in full
	}
	u := r.unit
	out := make(map[string]string, len(old.ResourceVersions))
	for i, o := range u.Objects {
		key := kube.RefOf(o).Key()
		if v := old.ResourceVersions[key]; v != "" && old.Digests[key] == r.digests[i] && versionable(u, o) {
			out[key] = v
		}
	}
	return out
}

// versionable says whether an object's resourceVersion tells that it is still
// as applied and ready: not when its readiness is more than its own state (a
// kind the unit has health checks for), nor when what is applied is filled in
// at each apply (served certificates and CA bundles, serving.Inject).
func versionable(u Unit, o *unstructured.Unstructured) bool {
	ann := o.GetAnnotations()
	for _, a := range []string{serving.AnnotationCA, serving.AnnotationCert, serving.AnnotationInjectCA} {
		if _, ok := ann[a]; ok {
			return false
		}
	}
	return !slices.ContainsFunc(u.Health, func(h HealthCheck) bool { return h.Kind == o.GetKind() })
}

// readyVersions are the resourceVersions to record for a unit whose objects
// are ready: what each applied or compared object was at (an object that was
// not ready then has changed since, to become ready), and the current ones'.
func readyVersions(r *unitRun) map[string]string {
	want := make(map[string]bool, len(r.unit.Objects))
	for _, o := range r.unit.Objects {
		if versionable(r.unit, o) {
			want[kube.RefOf(o).Key()] = true
		}
	}
	out := make(map[string]string, len(want))
	for _, o := range r.applied {
		if key := kube.RefOf(o).Key(); want[key] && o.GetResourceVersion() != "" {
			out[key] = o.GetResourceVersion()
		}
	}
	maps.Copy(out, r.current)
	if len(out) == 0 {
		return nil
	}
	return out
}

// finishRecord narrows the revision to what the plugin now has, marks it Ready
// and records the resourceVersions its objects are ready at. An unchanged
// re-apply writes nothing unless its result differs from the record.
func (w *wave) finishRecord(ctx context.Context, r *unitRun, all []ObjRef) error {
	u, rec, same, done := r.unit, r.rec, r.same, r.helm.Done
	next := rec.Clone()
	next.Objects = kube.Union(nil, all)
	next.ResourceVersions = readyVersions(r)
	next.Digests = unitDigests(r)
	next.Releases = unitReleases(u)
	next.HelmRevisions = nil
	for _, h := range done {
		if v := h.Revision(); v != 0 {
			if next.HelmRevisions == nil {
				next.HelmRevisions = map[string]int{}
			}
			next.HelmRevisions[h.Ref().String()] = v
		}
	}
	next.Phase, next.Message = PhaseReady, ""
	if same && slices.Equal(next.Objects, rec.Objects) && slices.Equal(next.Releases, rec.Releases) &&
		maps.Equal(next.HelmRevisions, rec.HelmRevisions) && maps.Equal(next.ResourceVersions, rec.ResourceVersions) &&
		maps.Equal(next.Digests, rec.Digests) &&
		rec.Phase == PhaseReady && rec.Message == "" {
		return nil
	}
	next.Finished = time.Now().UTC().Round(time.Second)
	return w.d.store.Write(ctx, next, nil)
}

// failRecord marks the revision an apply recorded Failed with the cause, and with
// Options.RollbackOnFailure restores the plugin's previous Ready revision, or
// uninstalls the plugin when it had none; the error says what was done.
func (w *wave) failRecord(ctx context.Context, r *unitRun, cause error, msg string) error {
	d, u, hist, rec := w.d, r.unit, r.hist, r.rec
	// Record the failure even when ctx is done: a record that says Applying lies.
	wctx := context.WithoutCancel(ctx)
	phase := PhaseFailed
	if errors.Is(cause, context.Canceled) {
		// Not a failure of the plugin: the user stopped the run. A re-run
		// continues from this revision.
		phase, msg = PhaseInterrupted, msg+"; run the same command again to continue"
	}
	if err := d.setPhase(wctx, rec.Clone(), phase, msg); err != nil {
		d.opts.Logger.Warn("could not record a failed apply", "plugin", u.Plugin, "error", err)
	}
	if !d.opts.RollbackOnFailure || u.rollback != nil || r.same || ctx.Err() != nil {
		return cause
	}
	var prev *Record
	for _, h := range slices.Backward(hist) {
		if h.Revision < rec.Revision && h.Phase == PhaseReady {
			prev = h
			break
		}
	}
	what := ""
	var err error
	switch {
	case prev.HasObjects():
		what = fmt.Sprintf("rolled plugin %s back to revision %d (%s)", u.Plugin, prev.Revision, prev.Version)
		_, err = d.rollbackTo(ctx, w.n, prev, fmt.Sprintf("rollback to %d: revision %d failed", prev.Revision, rec.Revision))
	case prev != nil:
		return fmt.Errorf("%w; not rolled back: revision %d of %s recorded no objects", cause, prev.Revision, u.Plugin)
	case !slices.ContainsFunc(hist, func(h *Record) bool { return h.Phase == PhaseReady }):
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
