package state

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
)

// Store keeps release records. Implementations must be safe for concurrent use by
// different plugins; the deployer never writes one plugin's records concurrently.
type Store interface {
	// History returns a plugin's revisions, oldest first; none (and no error) when
	// the plugin is not installed.
	History(ctx context.Context, plugin string) ([]*Record, error)
	// Latest returns every installed plugin's newest revision, sorted by plugin.
	Latest(ctx context.Context) ([]*Record, error)
	// Write stores revision r. With objects (possibly empty, never nil) it first
	// stores the objects, then the record naming them (setting r's Chunks,
	// Manifests and Count), then drops revisions beyond the store's history limit
	// and objects no record names: a reader sees a revision whole or not at all.
	// With nil objects only the record is written, keeping the objects r names. A
	// Legacy record is migrated: stored as written and its old form removed.
	Write(ctx context.Context, r *Record, objects []*unstructured.Unstructured) error
	// Objects reads back the objects revision r applied; ErrNoObjects when it
	// recorded none.
	Objects(ctx context.Context, r *Record) ([]*unstructured.Unstructured, error)
	// Delete removes every revision of a plugin; a plugin with none is no error.
	Delete(ctx context.Context, plugin string) error
}

// AllHistories is a Store that reads every plugin's revisions in one go: a run
// that reads them all at its start (the downgrade check) need not ask again per
// plugin.
type AllHistories interface {
	// Histories returns every installed plugin's revisions, oldest first, by
	// plugin; a plugin that is not installed has no entry.
	Histories(ctx context.Context) (map[string][]*Record, error)
}

// OwnedHistories is a Store that reads the revisions of some plugins only:
// the ones a run applies and the ones its owner has, without reading every
// plugin's (Secrets on shared heads).
type OwnedHistories interface {
	// HistoriesFor returns the revisions, oldest first, by plugin, of the
	// plugins named and of every plugin whose newest revision is owner's; a
	// plugin that is not installed has no entry.
	HistoriesFor(ctx context.Context, owner string, plugins []string) (map[string][]*Record, error)
}

// Latest is the newest of a plugin's revisions with the whole history, oldest
// first; nil when the plugin is not installed.
func Latest(ctx context.Context, s Store, plugin string) (*Record, []*Record, error) {
	recs, err := s.History(ctx, plugin)
	if err != nil || len(recs) == 0 {
		return nil, nil, err
	}
	return recs[len(recs)-1], recs, nil
}

// Phases of a release record.
const (
	PhaseApplying = "Applying"
	PhaseReady    = "Ready"
	PhaseFailed   = "Failed"
	// PhaseInterrupted is stored for a revision whose run was cancelled (Ctrl-C,
	// SIGTERM) before it was ready; a history also reports an Applying revision
	// that is not the newest (its run died) as Interrupted.
	PhaseInterrupted = "Interrupted"
	// PhaseSuperseded is never stored: a history reports a Ready revision that
	// a later one replaced as Superseded.
	PhaseSuperseded = "Superseded"
)

// ErrNoObjects is returned for a revision whose objects were not recorded (one
// migrated from an older kubeplug's inventory).
var ErrNoObjects = errors.New("the revision's objects were not recorded")

// Record is one revision of a plugin's release: what kubeplug applied, from which
// package and values, with what result. The newest revision is the plugin's
// inventory: while an apply runs its Objects are old ∪ new, so that a run killed at
// any point leaves a record covering everything the plugin may own.
type Record struct {
	Plugin   string `json:"plugin"`
	Revision int    `json:"revision"`
	Version  string `json:"version"`
	// PackageDigest is the digest of the plugin package the revision came from.
	PackageDigest string `json:"packageDigest,omitempty"`
	// ValuesDigest identifies the values; the values themselves are never stored.
	ValuesDigest string `json:"valuesDigest,omitempty"`
	// ContentDigest identifies the desired objects and Helm charts and values: equal
	// content is no new revision.
	ContentDigest string `json:"contentDigest,omitempty"`
	// AllowDowngrade is what this version's plugin.yaml declared
	// (spec.upgrade.allowDowngrade): moving from it to an older version is safe.
	AllowDowngrade bool     `json:"allowDowngrade,omitempty"`
	Requires       []string `json:"requires,omitempty"`
	// Owner is what manages the plugin: a PluginInstallation ("namespace/name")
	// when kubeplug's controller installed it, empty for the CLI. A run applies
	// and removes only the plugins of its own owner (and adopts the CLI's).
	Owner string `json:"owner,omitempty"`
	// Machine lists what the revision's plugin contributed outside Kubernetes
	// objects ("KIND KEY": control-plane flags, node files, labels, taints,
	// hooks, cloud resources), which uninstall and rollback cannot change: they
	// say what stays.
	Machine []string `json:"machine,omitempty"`
	// Objects are every object the plugin owns, its Helm releases' included.
	Objects []kube.ObjRef `json:"objects"`
	// Releases are the plugin's Helm releases; HelmRevisions the revision each was
	// at when this revision was Ready ("namespace/name" → revision).
	Releases      []kube.ReleaseRef `json:"releases,omitempty"`
	HelmRevisions map[string]int    `json:"helmRevisions,omitempty"`
	// Phase is Applying while an apply runs, Ready after one succeeded, Failed after
	// one failed; Message holds the diagnostics of the last run.
	Phase   string `json:"phase"`
	Message string `json:"message,omitempty"`
	// Description says what the revision was: install, upgrade, rollback to 3...
	Description string    `json:"description,omitempty"`
	Started     time.Time `json:"started,omitzero"`
	Finished    time.Time `json:"finished,omitzero"`
	// Chunks name where the applied objects are stored, in order; Manifests is
	// the sha256 of their concatenation and Count the number of objects.
	Chunks    []string `json:"chunks,omitempty"`
	Manifests string   `json:"manifests,omitempty"`
	Count     int      `json:"count,omitempty"`
	// Inline says that the applied objects are stored with the record itself
	// (a small revision), not in Chunks; Manifests is the sha256 of what is
	// stored.
	Inline bool `json:"inline,omitempty"`
	// ResourceVersions are, by object (ObjRef.Key), the resourceVersion at
	// which the object last held what kubeplug applies to it and was ready: an
	// object still at that resourceVersion, whose digest in Digests is that of
	// the content desired now, needs no read, apply or wait. Objects whose
	// readiness is more than their own state (health checks, served
	// certificates) have none. Absent in records of older kubeplugs.
	ResourceVersions map[string]string `json:"resourceVersions,omitempty"`
	// Digests are, by object (ObjRef.Key), the digest of the content kubeplug
	// last applied to the object (ssa.Digest), kept here rather than on the
	// object so that what is applied is no more than the plugin's content: an
	// object whose digest is that of the content desired now, and whose live
	// fields still hold it, is not applied again. A revision being applied
	// keeps only the digests its apply does not change (an object it applies
	// anew has none until the revision is Ready), so that a run killed at any
	// point leaves no digest an object does not hold. Absent in records of
	// older kubeplugs, which kept the digest in an annotation on the object
	// (ssa.AnnotationDigest): their objects are applied once more, which
	// removes the annotation.
	Digests map[string]string `json:"digests,omitempty"`

	// Legacy is set on a record read from an older kubeplug's inventory (never
	// stored): the next Write migrates it.
	Legacy bool `json:"-"`
}

// Inventory is the objects the revision lists; none for a nil record.
func (r *Record) Inventory() []kube.ObjRef {
	if r == nil {
		return nil
	}
	return r.Objects
}

// HasObjects says whether the revision stored the objects it applied (in
// chunks or inline), so that it can be restored.
func (r *Record) HasObjects() bool { return r != nil && (r.Inline || len(r.Chunks) > 0) }

// Digest is the digest the revision keeps of the content last applied to the
// object key (ObjRef.Key); empty when it keeps none, or for a nil record.
func (r *Record) Digest(key string) string {
	if r == nil {
		return ""
	}
	return r.Digests[key]
}

// HelmReleases is the Helm releases the revision lists; none for a nil record.
func (r *Record) HelmReleases() []kube.ReleaseRef {
	if r == nil {
		return nil
	}
	return r.Releases
}

// Clone is a deep copy of r.
func (r *Record) Clone() *Record {
	c := *r
	c.Requires = slices.Clone(r.Requires)
	c.Machine = slices.Clone(r.Machine)
	c.Objects = slices.Clone(r.Objects)
	c.Releases = slices.Clone(r.Releases)
	c.HelmRevisions = maps.Clone(r.HelmRevisions)
	c.Chunks = slices.Clone(r.Chunks)
	c.ResourceVersions = maps.Clone(r.ResourceVersions)
	c.Digests = maps.Clone(r.Digests)
	return &c
}

// sortRecords orders records by plugin, then revision.
func sortRecords(recs []*Record) {
	slices.SortFunc(recs, func(a, b *Record) int {
		if c := strings.Compare(a.Plugin, b.Plugin); c != 0 {
			return c
		}
		return a.Revision - b.Revision
	})
}
