package action

import (
	"context"
	"fmt"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/lock"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/render"
	"github.com/kubeplug/kubeplug/pkg/runtime"
	"github.com/kubeplug/kubeplug/pkg/source"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// Plan resolves a cluster spec and runs the initialise stage to show which plugins
// run, in which waves, and what each contributes.
type Plan struct {
	cfg *Config
}

// NewPlan returns a Plan action.
func NewPlan(cfg *Config) *Plan { return &Plan{cfg: cfg} }

// Run plans cl: resolve, initialise.
func (a *Plan) Run(ctx context.Context, cl *config.Cluster) (*engine.PlanDoc, diag.List) {
	r := a.cfg.newRun(cl, true)
	defer r.close()
	l := r.pipeline(ctx, append([]step{resolveStep}, through(stage.Initialise)...)...)
	if l = append(l, r.staleChartPins()...); l.HasFatal() {
		return nil, l
	}
	// Charts load and their values meet their schemas before a plan says they will
	// install.
	if l = append(l, render.CheckReleases(r.renderInput())...); l.HasFatal() {
		return nil, l
	}
	// Every flag is one the component accepts, of its type.
	if l = append(l, r.plan.LocatePatches(r.model, render.CheckFlags(ctx, r.renderInput()))...); l.HasFatal() {
		return nil, l
	}
	doc := r.plan.Doc(r.model)
	chartsDoc(r, doc)
	lockDoc(r, doc)
	expansionsDoc(r, doc)
	return doc, l
}

// CloudPlan says what up would change in the cloud, for a provider that deploys
// there (provider.Previewer: the aws provider creates a change set per existing
// stack, reads it and deletes it). Nothing is deployed or uploaded.
type CloudPlan struct {
	cfg *Config
	// StateDir as for Up.
	StateDir string
}

// NewCloudPlan returns a CloudPlan action.
func NewCloudPlan(cfg *Config) *CloudPlan { return &CloudPlan{cfg: cfg} }

// Run resolves and renders cl and asks its provider what up would change.
func (a *CloudPlan) Run(ctx context.Context, cl *config.Cluster) ([]provider.StackPreview, diag.List) {
	var l diag.List
	prov, err := provider.New(provider.Config{ClusterName: cl.Spec.Metadata.Name, Spec: cl.Spec.Spec.Provider, StateDir: a.StateDir, Logger: a.cfg.logger()})
	if err != nil {
		cl.Errorf(&l, "/spec/provider", "%v", err)
		return nil, l
	}
	pv, ok := prov.(provider.Previewer)
	if !ok {
		cl.Errorf(&l, "/spec/provider", "the %s provider deploys nothing to a cloud: there is no cloud plan", providerName(cl))
		return nil, l
	}
	r := a.cfg.newRun(cl, false)
	defer r.close()
	if l = r.pipeline(ctx, append([]step{resolveStep}, through(stage.Render)...)...); l.HasFatal() {
		return nil, l
	}
	in := r.renderInput()
	files, fl := render.Files(ctx, in)
	if l = append(l, r.plan.LocatePatches(r.model, fl)...); fl.HasFatal() {
		l.Sort()
		return nil, l
	}
	res, err := pv.Preview(ctx, &provider.Desired{ClusterName: in.ClusterName, KubernetesVersion: in.KubernetesVersion, Model: r.model, Files: files})
	if err != nil {
		l.Errorf("", 0, 0, "", "cloud plan: %v", err)
	}
	l.Sort()
	return res, l
}

// Move says what a Kubernetes upgrade asks of a plugin.
type Move string

// Moves, from most to least urgent.
const (
	// MoveBlocked: no version of the plugin that the cluster file allows supports
	// the target Kubernetes version.
	MoveBlocked Move = "blocked"
	// MoveMust: the plugin's current version does not support the target version;
	// it must move to Target together with the cluster.
	MoveMust Move = "must"
	// MoveMay: the current version supports the target too, but at the target the
	// resolver selects another (Target).
	MoveMay Move = "may"
	// MoveStays: the same version is selected at the target.
	MoveStays Move = "stays"
	// MoveAdded: a plugin the target's selection pulls in (a new requirement).
	MoveAdded Move = "added"
	// MoveRemoved: a plugin the target's selection no longer needs.
	MoveRemoved Move = "removed"
)

// KubernetesUpgrade is what moving a cluster to another Kubernetes version asks of
// its plugins.
type KubernetesUpgrade struct {
	Cluster string `json:"cluster"`
	// From is the cluster file's spec.kubernetesVersion; To the target.
	From string `json:"from"`
	To   string `json:"to"`
	// Plugins in the current plan's order, then those only the target selects.
	Plugins []PluginMove `json:"plugins"`
	// Unsatisfiable says why no selection resolves at the target (naming the
	// plugin and the versions available); empty when one does.
	Unsatisfiable string `json:"unsatisfiable,omitempty"`
}

// PluginMove is one plugin's part in a Kubernetes upgrade.
type PluginMove struct {
	Plugin string `json:"plugin"`
	// Current is the version selected at From; empty for an added plugin.
	Current string `json:"current,omitempty"`
	// Target is the version selected at To; empty when none is.
	Target string `json:"target,omitempty"`
	Move   Move   `json:"move"`
	// Supports is the current version's spec.kubernetesVersion; empty for any.
	Supports string `json:"supports,omitempty"`
	// Available, for a blocked plugin, lists every version with the Kubernetes
	// versions it needs ("2.0.0 (needs >=1.39)").
	Available []string `json:"available,omitempty"`
}

// upgradeMoves says how each plugin moves to the target Kubernetes version.
type upgradeMoves struct {
	target   *semver.Version
	idx      *source.Index
	selected map[string]*plugin.Package // the resolution at the target, by plugin
	resolved bool                       // the target resolved
	wanted   map[string]*semver.Constraints
}

// move is how cur, a plugin at the current version, moves.
func (u *upgradeMoves) move(cur *plugin.Package) PluginMove {
	m := PluginMove{Plugin: cur.Name, Current: cur.Version.String()}
	if cur.KubernetesVersion != nil {
		m.Supports = cur.KubernetesVersion.String()
	}
	supported := cur.KubernetesVersion == nil || cur.KubernetesVersion.Check(u.target)
	switch t, ok := u.selected[cur.Name]; {
	case ok && !supported:
		m.Target, m.Move = t.Version.String(), MoveMust
	case ok && !t.Version.Equal(cur.Version):
		m.Target, m.Move = t.Version.String(), MoveMay
	case ok:
		m.Target, m.Move = t.Version.String(), MoveStays
	case u.resolved:
		m.Move = MoveRemoved
	case supported:
		// The target did not resolve, but not because of this one.
		m.Target, m.Move = m.Current, MoveStays
	default:
		u.blocked(cur, &m)
	}
	return m
}

// blocked fills m for a plugin the target cannot keep when the target did not
// resolve: a version the cluster file allows that supports the target is a
// must-move to it; else it is blocked, with the versions and what they need.
func (u *upgradeMoves) blocked(cur *plugin.Package, m *PluginMove) {
	m.Move = MoveBlocked
	for _, v := range u.idx.Versions(cur.Name) {
		if c := u.wanted[cur.Name]; c != nil && !c.Check(v.Version) {
			continue
		}
		if v.KubernetesVersion == nil || v.KubernetesVersion.Check(u.target) {
			if m.Move == MoveBlocked {
				m.Move, m.Target = MoveMust, v.Version.String()
			}
			continue
		}
		m.Available = append(m.Available, v.Version.String()+" (needs "+v.KubernetesVersion.String()+")")
	}
	if m.Move != MoveBlocked {
		m.Available = nil
	}
}

// Upgrade resolves cl at its own Kubernetes version and at target, and says per plugin whether it must move, may move or stays. An
// unsatisfiable target is an error diagnostic; the result still lists every plugin
// (the blocked ones with their versions). Nothing runs but the resolver.
func (a *Plan) Upgrade(ctx context.Context, cl *config.Cluster, target *semver.Version) (*KubernetesUpgrade, diag.List) {
	lf, err := readLock(cl)
	if err != nil {
		var l diag.List
		l.Errorf(lock.PathFor(cl.File), 0, 0, "", "%v", err)
		return nil, l
	}
	idx, l := a.cfg.LoadIndex(ctx, cl.Sources()...)
	if l.HasFatal() {
		return nil, l
	}
	rs := runtime.NewResolver(runtime.Options{Logger: a.cfg.logger(), Timeout: a.cfg.PluginTimeout, InProcess: a.cfg.InProcess})
	defer func() { _ = rs.Close() }() // only the plan is made: no stage runs
	// Both resolutions keep the locked versions a target admits: what must
	// move is what the lock cannot hold at the target.
	e := engine.New(engine.Options{Facts: provider.FactsOf, Logger: a.cfg.logger(), Env: a.cfg.env(), AllowValuesOutside: a.cfg.AllowValuesOutside, Redact: true, Runtimes: rs, Prefer: a.cfg.prefer(lf)})
	now, pl := e.Plan(ctx, cl, idx)
	l = append(l, pl...)
	if now == nil {
		return nil, l
	}
	at := *cl
	at.KubernetesVersion = target
	next, nl := e.Plan(ctx, &at, idx)
	out := &KubernetesUpgrade{Cluster: cl.Spec.Metadata.Name, From: cl.KubernetesVersion.String(), To: target.String()}
	selected := map[string]*plugin.Package{}
	if next == nil {
		for _, d := range nl {
			if d.Severity == diag.Fatal {
				out.Unsatisfiable = d.Message
				l = append(l, diag.Diagnostic{Severity: diag.Fatal, File: d.File, Field: d.Field, Message: fmt.Sprintf("at Kubernetes %s: %s", target, d.Message)})
			}
		}
	} else {
		for _, p := range next.Plugins {
			selected[p.Package.Name] = p.Package
		}
	}
	u := upgradeMoves{target: target, idx: idx, selected: selected, resolved: next != nil, wanted: map[string]*semver.Constraints{}}
	for _, r := range cl.Enabled() {
		if c, err := semver.NewConstraint(r.Version); r.Version != "" && err == nil {
			u.wanted[r.Name] = c
		}
	}
	seen := map[string]bool{}
	for _, p := range now.Plugins {
		seen[p.Package.Name] = true
		out.Plugins = append(out.Plugins, u.move(p.Package))
	}
	if next != nil {
		for _, p := range next.Plugins {
			if !seen[p.Package.Name] {
				out.Plugins = append(out.Plugins, PluginMove{Plugin: p.Package.Name, Target: p.Package.Version.String(), Move: MoveAdded})
			}
		}
	}
	l.Sort()
	return out, l
}
