package action

import (
	"context"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/internal/suggest"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/lock"
)

// The lock file is the pin, as Chart.lock, go.sum, package-lock.json and
// Cargo.lock are for their users: every run that resolves a cluster file
// with a kubeplug.lock beside it prefers the versions the lock pins
// (engine.Options.Prefer), so a version published after the lock was written
// is not taken until the user asks for it — `kubeplug lock --update [NAME...]`,
// or --update on plan, render, apply and up (Config.Update, UpdateAll). A
// locked version the cluster file's constraints no longer admit gives way to
// the highest they do, as Cargo does when Cargo.toml changes. plan says which
// newer versions the lock holds back, and how the lock would change.

// readLock reads the lock file beside the cluster file; nil without a cluster
// file or a lock file.
func readLock(cl *config.Cluster) (*lock.File, error) {
	if cl == nil || cl.File == "" {
		return nil, nil
	}
	return lock.Read(lock.PathFor(cl.File))
}

// prefer returns the versions of lf a run keeps: every pinned version but
// those the run updates (Config.Update, UpdateAll).
func (c *Config) prefer(lf *lock.File) map[string]*semver.Version {
	if lf == nil || c.UpdateAll {
		return nil
	}
	out := map[string]*semver.Version{}
	for _, e := range lf.Plugins {
		v, err := semver.NewVersion(e.Version)
		if err != nil || slices.Contains(c.Update, e.Name) {
			continue // an unparsable pin holds nothing back
		}
		out[e.Name] = v
	}
	return out
}

// lockOf is the lock file that pins plan, and the charts by reference of its
// plugins' releases (by plugin; none before the stages fetched them).
func lockOf(plan *engine.Plan, charts map[string][]lock.Chart) *lock.File {
	entries := make([]lock.Entry, 0, len(plan.Plugins))
	for _, p := range plan.Plugins {
		entries = append(entries, lock.Entry{Name: p.Package.Name, Version: p.Package.Version.String(), Source: p.Package.Origin.Name, Digest: p.Package.Digest, Charts: charts[p.Package.Name]})
	}
	return lock.New(entries)
}

// checkLock refuses a plan whose plugins' locked versions changed digest, when the
// cluster file has a kubeplug.lock (lf) beside it, and a plugin to update
// (Config.Update) that neither the lock nor the plan has. With Config.Locked, it
// also refuses a plan that would change the lock file (no lock file, a plugin
// added, removed or at another version), listing the changes: CI runs
// plan/render/apply --locked so that what it deploys is exactly what was locked.
func (c *Config) checkLock(cl *config.Cluster, lf *lock.File, plan *engine.Plan) diag.List {
	var l diag.List
	if cl == nil || cl.File == "" {
		if c.Locked {
			l.Errorf("", 0, 0, "", "--locked needs a cluster file: the lock file is beside it")
		}
		return l
	}
	path := lock.PathFor(cl.File)
	for _, p := range plan.Plugins {
		if msg := lf.Mismatch(p.Package.Name, p.Package.Version.String(), p.Package.Digest); msg != "" {
			l.Errorf(path, 0, 0, "", "%s", msg)
		}
	}
	if len(c.Update) > 0 {
		known := plan.Names()
		if lf != nil {
			for _, e := range lf.Plugins {
				known = append(known, e.Name)
			}
		}
		for _, n := range c.Update {
			if !slices.Contains(known, n) {
				l.Errorf(path, 0, 0, "", "--update %s: neither %s nor the cluster's plan has plugin %s%s", n, lock.FileName, n, suggest.Hint(suggest.Closest(n, known)))
			}
		}
	}
	if !c.Locked || l.HasFatal() {
		return l
	}
	if lf == nil {
		l.Errorf(path, 0, 0, "", "--locked: there is no lock file; write one with 'kubeplug lock -f %s'", cl.File)
		return l
	}
	// Charts are checked once fetched, after the stages name them (fetchCharts).
	locked := map[string][]lock.Chart{}
	for _, e := range lf.Plugins {
		locked[e.Name] = e.Charts
	}
	if cur := lockOf(plan, locked); !lf.EqualPlugins(cur) {
		l.Errorf(path, 0, 0, "", "the lock file would change (--locked): %s; run 'kubeplug lock -f %s' and commit it", strings.Join(lf.Diff(cur), "; "), cl.File)
	}
	return l
}

// lockDoc completes doc, the plan of r, with what the lock file says of it:
// per plugin the version it pins, and how it would change to pin the plan.
func lockDoc(r *run, doc *engine.PlanDoc) {
	if r.lock == nil {
		return
	}
	for i := range doc.Plugins {
		if e, ok := r.lock.Entry(doc.Plugins[i].Name); ok {
			doc.Plugins[i].Locked = e.Version
		}
	}
	doc.Lock = &engine.PlanLock{File: lock.PathFor(r.cluster.File), Changes: r.lock.Diff(lockOf(r.plan, r.chartPins()))}
}

// updateLock brings an existing kubeplug.lock beside the cluster file up to what
// a successful apply deployed: a plugin the file enables anew, one it no longer
// enables, one whose locked version its constraints no longer admit, and those
// the run updates (--update). It returns the changes; no lock file is created
// (kubeplug lock does that) and none is touched with --locked (which has
// already refused any change).
func updateLock(r *run) ([]string, error) {
	if r.cfg.Locked || r.cluster == nil || r.cluster.File == "" || r.plan == nil || r.lock == nil {
		return nil, nil
	}
	cur := lockOf(r.plan, r.chartPins())
	if r.lock.Equal(cur) {
		return nil, nil
	}
	changes := r.lock.Diff(cur)
	if err := cur.Write(lock.PathFor(r.cluster.File)); err != nil {
		return nil, err
	}
	return changes, nil
}

// Lock resolves a cluster and pins every plugin it picked in kubeplug.lock beside
// the cluster file. An existing lock's versions are kept (the resolution prefers
// them) unless Update or UpdateAll says to move them.
type Lock struct {
	cfg *Config
	// Locked fails, writing nothing, when the lock file would change.
	Locked bool
	// Update names the plugins to move to the newest versions the cluster file
	// allows; the others keep their locked versions.
	Update []string
	// UpdateAll moves every plugin to the newest version the cluster file allows.
	UpdateAll bool
}

// NewLock returns a Lock action.
func NewLock(cfg *Config) *Lock { return &Lock{cfg: cfg} }

// LockResult is what [Lock.Run] did.
type LockResult struct {
	File string `json:"file"`
	// Changes say how the lock file changed (or would have, with Locked).
	Changes []string   `json:"changes"`
	Lock    *lock.File `json:"lock"`
	// Newer names, per plugin the lock still holds back, the version an
	// update would take ("dex 1.5.0"); none after an update of every plugin.
	Newer []string `json:"newer,omitempty"`
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
	cfg := *a.cfg
	// The lock's own --locked check is below, naming the changes its way.
	cfg.Locked = false
	cfg.Update = append(slices.Clone(cfg.Update), a.Update...)
	cfg.UpdateAll = cfg.UpdateAll || a.UpdateAll
	doc, pl := NewPlan(&cfg).Run(ctx, cl)
	l = append(l, pl...)
	if doc == nil || l.HasFatal() {
		return nil, l
	}
	entries := make([]lock.Entry, 0, len(doc.Plugins))
	res := &LockResult{File: path}
	for _, p := range doc.Plugins {
		e := lock.Entry{Name: p.Name, Version: p.Version, Source: p.Origin, Digest: p.Digest}
		for _, c := range p.Charts {
			e.Charts = append(e.Charts, lock.Chart(c))
		}
		entries = append(entries, e)
		if p.Newer != "" {
			res.Newer = append(res.Newer, p.Name+" "+p.Newer)
		}
	}
	slices.Sort(res.Newer)
	cur := lock.New(entries)
	res.Changes, res.Lock = old.Diff(cur), cur
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
