package action

import (
	"context"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/lock"
)

// checkLock refuses a plan whose plugins' locked versions changed digest, when the
// cluster file has a kubeplug.lock beside it. With locked, it also refuses a plan that
// would change the lock file (no lock file, a plugin added, removed or at another
// version), listing the changes: CI runs plan/render/apply --locked so that what it
// deploys is exactly what was locked.
func checkLock(cl *config.Cluster, plan *engine.Plan, locked bool) diag.List {
	var l diag.List
	if cl == nil || cl.File == "" {
		if locked {
			l.Errorf("", 0, 0, "", "--locked needs a cluster file: the lock file is beside it")
		}
		return l
	}
	path := lock.PathFor(cl.File)
	lf, err := lock.Read(path)
	if err != nil {
		l.Errorf(path, 0, 0, "", "%v", err)
		return l
	}
	for _, p := range plan.Plugins {
		if msg := lf.Mismatch(p.Package.Name, p.Package.Version.String(), p.Package.Digest); msg != "" {
			l.Errorf(path, 0, 0, "", "%s", msg)
		}
	}
	if !locked || l.HasFatal() {
		return l
	}
	if lf == nil {
		l.Errorf(path, 0, 0, "", "--locked: there is no lock file; write one with 'kubeplug lock -f %s'", cl.File)
		return l
	}
	entries := make([]lock.Entry, 0, len(plan.Plugins))
	for _, p := range plan.Plugins {
		entries = append(entries, lock.Entry{Name: p.Package.Name, Version: p.Package.Version.String(), Source: p.Package.Origin.Name, Digest: p.Package.Digest})
	}
	if cur := lock.New(entries); !lf.Equal(cur) {
		l.Errorf(path, 0, 0, "", "the lock file would change (--locked): %s; run 'kubeplug lock -f %s' and commit it", strings.Join(lf.Diff(cur), "; "), cl.File)
	}
	return l
}

// updateLock brings an existing kubeplug.lock beside the cluster file up to what
// a successful apply deployed, as go.sum follows go get: a new version picked up
// by apply is pinned from then on. It returns the changes; no lock file is
// created (kubeplug lock does that) and none is touched with --locked (which has
// already refused any change).
func updateLock(r *run) ([]string, error) {
	if r.cfg.Locked || r.cluster == nil || r.cluster.File == "" || r.plan == nil {
		return nil, nil
	}
	path := lock.PathFor(r.cluster.File)
	old, err := lock.Read(path)
	if err != nil || old == nil {
		return nil, err
	}
	entries := make([]lock.Entry, 0, len(r.plan.Plugins))
	for _, p := range r.plan.Plugins {
		entries = append(entries, lock.Entry{Name: p.Package.Name, Version: p.Package.Version.String(), Source: p.Package.Origin.Name, Digest: p.Package.Digest})
	}
	cur := lock.New(entries)
	if old.Equal(cur) {
		return nil, nil
	}
	changes := old.Diff(cur)
	if err := cur.Write(path); err != nil {
		return nil, err
	}
	return changes, nil
}

// Lock resolves a cluster and pins every plugin it picked in kubeplug.lock beside
// the cluster file.
type Lock struct {
	cfg *Config
	// Locked fails, writing nothing, when the lock file would change.
	Locked bool
}

// NewLock returns a Lock action.
func NewLock(cfg *Config) *Lock { return &Lock{cfg: cfg} }

// LockResult is what [Lock.Run] did.
type LockResult struct {
	File string `json:"file"`
	// Changes say how the lock file changed (or would have, with Locked).
	Changes []string   `json:"changes"`
	Lock    *lock.File `json:"lock"`
}

// Run resolves cl (the plan step, nothing deployed) and writes the lock file; with
// Locked, a lock file that would change is an error listing the changes. A locked
// version whose digest changed is refused by the resolution itself.
func (a *Lock) Run(ctx context.Context, cl *config.Cluster) (*LockResult, diag.List) {
	var l diag.List
	if cl == nil || cl.File == "" {
		l.Errorf("", 0, 0, "", "kubeplug lock needs a cluster file (-f): the lock file is written beside it")
		return nil, l
	}
	path := lock.PathFor(cl.File)
	old, err := lock.Read(path)
	if err != nil {
		l.Errorf(path, 0, 0, "", "%v", err)
		return nil, l
	}
	doc, pl := NewPlan(a.cfg).Run(ctx, cl)
	l = append(l, pl...)
	if doc == nil || l.HasFatal() {
		return nil, l
	}
	entries := make([]lock.Entry, 0, len(doc.Plugins))
	for _, p := range doc.Plugins {
		entries = append(entries, lock.Entry{Name: p.Name, Version: p.Version, Source: p.Origin, Digest: p.Digest})
	}
	cur := lock.New(entries)
	res := &LockResult{File: path, Changes: old.Diff(cur), Lock: cur}
	if old == nil {
		res.Changes = []string{"no lock file yet"}
	}
	if old.Equal(cur) {
		res.Changes = nil
		return res, l
	}
	if a.Locked {
		l.Errorf(path, 0, 0, "", "the lock file would change (--locked): %s", strings.Join(res.Changes, "; "))
		return nil, l
	}
	if err := cur.Write(path); err != nil {
		l.Errorf(path, 0, 0, "", "%v", err)
		return nil, l
	}
	return res, l
}
