package action

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"
	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/internal/faultpoint"
	"github.com/kubeplug/kubeplug/internal/proc"
	"github.com/kubeplug/kubeplug/pkg/check"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/lease"
	"github.com/kubeplug/kubeplug/pkg/lock"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/render"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// This file holds the steps that reach a running cluster, and every call the
// pipeline makes into pkg/deploy.

// live is the cluster side of a run.
type live struct {
	// op names the operation in the lease ("apply", "up").
	op     string
	opts   DeployOptions
	dryRun bool
	// cancel ends the run with a cause: losing the lease cancels everything.
	cancel context.CancelCauseFunc

	// rest is where the cluster is: the kubeconfig target's (apply) or what
	// provision returned (up).
	rest *rest.Config
	// currentContext, when set, names the kubeconfig's current context, the
	// target of an apply that named none (no --context, --kubeconfig or server,
	// not the file's own local cluster): a cluster that another file's name was
	// last applied to is then refused (see otherCluster).
	currentContext string
	// blocked says another run held the cluster (its operation lease, or its
	// provider's lock) for as long as this one was to wait: the run changed
	// nothing, and has no verdict on the cluster.
	blocked bool
	// Set by connect.
	deployer *deploy.Deployer
	unlock   func()
	// Rendered once, before the first plugin is applied (see deployStep).
	objects  map[string][]map[string]any
	releases map[string][]render.Release
	// machine is what each plugin contributed outside Kubernetes objects.
	machine map[string][]string
	// checks runs the validate checks; made by the first validate wave.
	checks *check.Runner
	// res collects what the steps did.
	res *ApplyResult
}

// unlockLease frees the lease, when connect took one.
func (lv *live) unlockLease() {
	if lv.unlock != nil {
		lv.unlock()
	}
}

// connectStep reaches the cluster, takes its operation lease (not in a dry run)
// and refuses a downgrade before any wave changes anything. Input: r.live.rest,
// the plan. Output: r.live.deployer and the held lease.
var connectStep = step{stepConnect, func(ctx context.Context, r *run) diag.List {
	var l diag.List
	lv := &r.live
	o := lv.opts
	d, err := deploy.New(rest.CopyConfig(lv.rest), deploy.Options{
		Logger: r.log(), Events: o.Events, Timeout: o.Timeout, DryRun: lv.dryRun, ForceConflicts: o.ForceConflicts, ForceCRDChanges: o.ForceCRDChanges,
		RollbackOnFailure: o.RollbackOnFailure, AllowDowngrade: o.AllowDowngrade, HistoryMax: o.HistoryMax,
		Sensitive: r.plan.Secrets(), Owner: o.Owner, Adopt: o.Adopt, Remedies: o.Remedies, Client: o.Client, Heads: o.Heads,
		ServingCerts: r.cfg.ServingCerts,
	})
	if err == nil {
		if err = d.Ping(ctx); err != nil {
			err = fmt.Errorf("cannot reach the cluster: %w", err)
		}
	}
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return l
	}
	lv.deployer = d
	// The version and discovery are asked at once, not one after the other:
	// every run, a no-op too, waits for both.
	var problems []string
	var discovered sync.WaitGroup
	discovered.Go(func() { problems = d.DiscoveryProblems() })
	raw, err := d.ServerVersion(ctx)
	discovered.Wait()
	if l = append(l, checkServerVersion(r, raw, err)...); l.HasFatal() {
		return l
	}
	for _, p := range problems {
		// An aggregated API whose server is down: the rest still works.
		l.Warnf("", 0, 0, "", "API discovery is incomplete, going on without %s", p)
	}
	if lv.dryRun && !o.Lease.External {
		// No lease is taken, but the cluster's name is checked as Lock does.
		name := r.cluster.Spec.Metadata.Name
		prev, err := lease.ClusterName(ctx, d.Client(), d.Namespace())
		if err != nil {
			r.log().Debug("cannot read the cluster's name from its operation lease", "error", err)
		} else if prev != "" && prev != name {
			if err := lv.otherCluster(r, &l)(prev); err != nil {
				r.cluster.Errorf(&l, "/metadata/name", "%v", err)
				return l
			}
		}
	}
	if !lv.dryRun {
		lctx, unlock, err := o.Lease.lockNamed(ctx, d, lv.op, r.cluster.Spec.Metadata.Name, lv.otherCluster(r, &l), r.log())
		if oe := (*otherClusterError)(nil); errors.As(err, &oe) {
			r.cluster.Errorf(&l, "/metadata/name", "%v", err)
			return l
		}
		if err != nil {
			lv.blocked = errors.As(err, new(*lease.LockedError))
			l.Errorf("", 0, 0, "", "%v", err)
			return l
		}
		lv.unlock = unlock
		context.AfterFunc(lctx, func() { lv.cancel(context.Cause(lctx)) })
	}
	versions := map[string]string{}
	for _, pl := range r.plan.Plugins {
		versions[pl.Package.Name] = pl.Package.Version.String()
	}
	err = d.CheckDowngrades(ctx, versions)
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		if e != nil {
			l.Errorf("", 0, 0, "", "%v", e)
		}
	}
	return l
}}

// otherClusterError refuses to apply a cluster file to the current context when
// the cluster there was last applied a file of another name.
type otherClusterError struct {
	file, name, context, previous string
}

func (e *otherClusterError) Error() string {
	return fmt.Sprintf("%s names cluster %s, but the current context %s is cluster %s (the name of the last cluster file applied to it); nothing was changed. "+
		"Give --context or --kubeconfig for %s's cluster, or run kubeplug up -f %s for a local one; or give --context %s to apply %s there anyway (the cluster is then named %s)",
		e.file, e.name, e.context, e.previous, e.name, e.file, e.context, e.file, e.name)
}

// otherCluster is asked when the cluster's lease names another cluster than
// the file applied (lease.Options.OtherCluster): on the current context it
// refuses, since the context is likely another cluster than the file means; on
// a target given explicitly the cluster takes the file's name, with a warning
// in l.
func (lv *live) otherCluster(r *run, l *diag.List) func(string) error {
	return func(previous string) error {
		name := r.cluster.Spec.Metadata.Name
		if lv.currentContext != "" {
			return &otherClusterError{file: r.cluster.File, name: name, context: lv.currentContext, previous: previous}
		}
		if lv.dryRun {
			r.cluster.Warnf(l, "/metadata/name", "the cluster is named %s (the name of the last cluster file applied to it); applying this file names it %s", previous, name)
			return nil
		}
		r.cluster.Warnf(l, "/metadata/name", "the cluster was named %s (the name of the last cluster file applied to it); it is now named %s", previous, name)
		return nil
	}
}

// deployStep runs the deploy stage and applies the plugins' content. Wave 0's
// plugins run their deploy stage, the content is rendered once from the model as
// that left it, and then each plugin is scheduled on its own (schedule.go): as
// soon as the plugins it waits for are deployed and ready, it runs its deploy
// stage (after wave 0) and its content is applied and waited for. The first
// failure stops every plugin that has not started. Input: r.plan, r.model,
// r.live.deployer. Output: applied and pruned counts in r.live.res; the deploy
// stage appended to r.stages.
var deployStep = step{stepDeploy, func(ctx context.Context, r *run) diag.List {
	lv := &r.live
	if len(r.plan.Waves) == 0 {
		r.stages = append(r.stages, stage.Deploy)
		return nil
	}
	all := r.engine.RunWave(ctx, r.plan, stage.Deploy, 0, r.model)
	if all.HasFatal() {
		return all
	}
	objs, rels, cl := render.Content(ctx, r.renderInput())
	lv.objects, lv.releases = objs, rels
	if all = append(all, r.plan.LocatePatches(r.model, cl)...); cl.HasFatal() {
		return all
	}
	lv.machine = machineContributions(r.model)
	if all = append(all, lv.schedule(ctx, r)...); all.HasFatal() {
		return all
	}
	r.stages = append(r.stages, stage.Deploy)
	return all
}}

// machineContributions lists, by plugin, what each contributed to the model
// outside Kubernetes objects ("KIND KEY"), for its release record.
func machineContributions(m *model.Model) map[string][]string {
	out := map[string][]string{}
	if m == nil {
		return out
	}
	for _, c := range engine.Contributions(m) {
		if strings.HasPrefix(c.Kind, "kubernetes.") {
			continue
		}
		out[c.Plugin] = append(out[c.Plugin], c.Kind+" "+c.Key)
	}
	for p := range out {
		slices.Sort(out[p])
	}
	return out
}

// validateStep runs the validate stage wave by wave: wave w's plugins run their
// own validate, then their plugin.yaml checks run against the cluster, every
// plugin of the wave at once, then the test hooks of their Helm releases that
// ask for them (test: true, helmtest.go). A failed check is fatal and stops the run before
// the next wave. A dry run deployed nothing, so it checks nothing. Input: r.plan,
// r.model, r.live.rest. Output: the checks' results in r.live.res, in wave order;
// r.live.res.Validated.
var validateStep = step{stepValidate, func(ctx context.Context, r *run) diag.List {
	var all diag.List
	lv := &r.live
	for w, wave := range r.plan.Waves {
		l := r.engine.RunWave(ctx, r.plan, stage.Validate, w, r.model)
		all = append(all, l...)
		if all.HasFatal() {
			return all
		}
		if lv.dryRun {
			continue
		}
		l = lv.runChecks(ctx, r.cluster.Spec.Metadata.Name, wave, r)
		if all = append(all, l...); l.HasFatal() {
			return all
		}
		l = lv.runHelmTests(ctx, wave, r.model)
		if all = append(all, l...); l.HasFatal() {
			return all
		}
	}
	r.stages = append(r.stages, stage.Validate)
	lv.res.Validated = true
	return all
}}

// checkRunner makes lv.checks, once.
func (lv *live) checkRunner(r *run, cluster string) error {
	if lv.checks != nil {
		return nil
	}
	runner, err := check.New(rest.CopyConfig(lv.rest), check.Options{Logger: r.log(), Cluster: cluster})
	lv.checks = runner
	return err
}

func (lv *live) runChecks(ctx context.Context, cluster string, wave []*engine.Planned, r *run) diag.List {
	var l diag.List
	if err := lv.checkRunner(r, cluster); err != nil {
		l.Errorf("", 0, 0, "", "validate checks: %v", err)
		return l
	}
	results := make([][]check.Result, len(wave))
	var wg sync.WaitGroup
	for i, pl := range wave {
		spec := pl.Package.Manifest.Spec
		if len(pl.Checks) == 0 {
			continue
		}
		// The checks as rendered for this cluster (a wait for an object in the
		// namespace a value names), not as plugin.yaml writes them.
		cp := check.Plugin{Name: pl.Package.Name, Checks: pl.Checks, FS: pl.Package.FS, Dir: proc.PackageDir(pl.Package.Location)}
		if pl.Values != nil {
			cp.Values = pl.Values.Cluster
		}
		cp.Pins = map[string]string{}
		if rt := spec.Runtime; rt != nil {
			cp.Pins[path.Clean(rt.Command[0])] = rt.SHA256
		}
		for _, c := range pl.Checks {
			if c.Exec != nil && c.Exec.SHA256 != "" {
				cp.Pins[path.Clean(c.Exec.Command[0])] = c.Exec.SHA256
			}
		}
		wg.Go(func() { results[i] = lv.checks.Run(ctx, cp) })
	}
	wg.Wait()
	for _, res := range results {
		lv.res.Checks = append(lv.res.Checks, res...)
		l = append(l, check.Diagnostics(res)...)
	}
	return l
}

// recordStep brings the cluster's release records in line with the plan:
// installed plugins the plan no longer has are uninstalled. Nothing in the plan
// requires them (the resolver would have kept them), so they go without cascade.
// Not in a dry run. Input: r.live.deployer, r.plan. Output: r.live.res.Removed.
var recordStep = step{stepRecord, func(ctx context.Context, r *run) diag.List {
	var l diag.List
	lv := &r.live
	for _, name := range slices.Sorted(maps.Keys(r.plan.Newer)) {
		lv.res.Newer = append(lv.res.Newer, name+" "+r.plan.Newer[name])
	}
	if lv.dryRun {
		return nil
	}
	removed, err := removeUnlisted(ctx, lv.deployer, r.plan.Names())
	lv.res.Removed = removed
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return l
	}
	if lv.res.LockUpdated, err = updateLock(r); err != nil {
		l.Errorf(lock.PathFor(r.cluster.File), 0, 0, "", "update the lock file: %v", err)
	}
	return l
}}

func removeUnlisted(ctx context.Context, d *deploy.Deployer, planned []string) ([]string, error) {
	// Only this run's owner's plugins: the CLI leaves the controller's alone, and
	// one installation another's.
	invs, err := d.Owned(ctx)
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, inv := range invs {
		if !slices.Contains(planned, inv.Plugin) {
			gone = append(gone, inv.Plugin)
		}
	}
	if len(gone) == 0 {
		return nil, nil
	}
	faultpoint.Hit("apply:before-remove-unlisted")
	return d.Uninstall(ctx, gone, false)
}

func unit(pl *engine.Planned, objs []map[string]any, rels []render.Release) (deploy.Unit, error) {
	u := deploy.Unit{Plugin: pl.Package.Name, Version: pl.Package.Version.String(), Digest: pl.Package.Digest}
	if up := pl.Package.Manifest.Spec.Upgrade; up != nil {
		u.AllowDowngrade = up.AllowDowngrade
	}
	for _, h := range pl.Package.Manifest.Spec.Health {
		u.Health = append(u.Health, deploy.HealthCheck{APIVersion: h.APIVersion, Kind: h.Kind, Expression: h.Expression})
	}
	if dp := pl.Package.Manifest.Spec.Drift; dp != nil {
		for _, i := range dp.Ignore {
			u.DriftIgnore = append(u.DriftIgnore, deploy.DriftIgnore{APIVersion: i.APIVersion, Kind: i.Kind, Namespace: i.Namespace, Name: i.Name, Paths: i.Paths})
		}
	}
	for _, r := range rels {
		u.Releases = append(u.Releases, deploy.HelmRelease{Name: r.Name, Namespace: r.Namespace, Chart: r.Chart, Values: r.Values, PostRenderer: r.PostRenderer})
	}
	for _, r := range pl.Package.Manifest.Spec.Requires {
		u.Requires = append(u.Requires, r.Name)
	}
	var err error
	if u.ValuesDigest, err = valuesDigest(pl); err != nil {
		return u, err
	}
	for _, o := range objs {
		obj, err := unstructuredOf(o)
		if err != nil {
			return u, fmt.Errorf("decode %s: %w", model.ObjectKey(o), err)
		}
		u.Objects = append(u.Objects, obj)
	}
	return u, nil
}

// valuesDigest identifies a plugin's values in its release record, which
// never holds the values themselves.
func valuesDigest(pl *engine.Planned) (string, error) {
	raw, err := json.Marshal(pl.Values.Cluster)
	if err != nil {
		return "", fmt.Errorf("digest values: %w", err)
	}
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// unitDiags turns a wave's error into one diagnostic per failed plugin.
func unitDiags(err error) diag.List {
	if err == nil {
		return nil
	}
	var l diag.List
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var ue *deploy.UnitError
		if errors.As(e, &ue) {
			msg := ue.Err.Error()
			if ue.Object != "" {
				msg = ue.Object + ": " + msg
			}
			l = append(l, diag.Diagnostic{Severity: diag.Fatal, Plugin: ue.Plugin, Message: msg})
			continue
		}
		l.Errorf("", 0, 0, "", "%v", e)
	}
	return l
}

// checkServerVersion holds the plan to the Kubernetes version the cluster really
// runs, raw as it reported it (or err, why it could not be read): a file that names another minor version is an error (its plugins were
// chosen for that one), another patch level a warning; every plugin's
// kubernetesVersion constraint must accept the live version.
func checkServerVersion(r *run, raw string, err error) diag.List {
	var l diag.List
	if err != nil {
		l.Errorf("", 0, 0, "", "cannot read the cluster's Kubernetes version: %v", err)
		return l
	}
	live, err := semver.NewVersion(raw)
	if err != nil {
		l.Warnf("", 0, 0, "", "the cluster reports Kubernetes version %q, which is not a version kubeplug can compare; plugins are checked against spec.kubernetesVersion only", raw)
		return l
	}
	// A distribution's build (v1.37.1+k3s1, v1.37.1-eks-abc) is its Kubernetes version.
	core, _ := semver.NewVersion(fmt.Sprintf("%d.%d.%d", live.Major(), live.Minor(), live.Patch()))
	const ptr = "/spec/kubernetesVersion"
	if want := r.cluster.KubernetesVersion; want != nil {
		switch {
		case want.Major() != core.Major() || want.Minor() != core.Minor():
			r.cluster.Errorf(&l, ptr, "the cluster runs Kubernetes %s, but the file says %s: its plugins are chosen for %d.%d; set spec.kubernetesVersion to %s, or move the cluster to %s first (kubeplug up, for a cluster kubeplug made)",
				core, want, want.Major(), want.Minor(), core, want)
			return l
		case !want.Equal(core):
			r.cluster.Warnf(&l, ptr, "the cluster runs Kubernetes %s, the file says %s: plugins are checked against %s", core, want, core)
		}
	}
	for _, pl := range r.plan.Plugins {
		if c := pl.Package.KubernetesVersion; c != nil && !c.Check(core) {
			l.Errorf("", 0, 0, "", "plugin %s %s needs Kubernetes %s, and the cluster runs %s", pl.Package.Name, pl.Package.Version, c, core)
		}
	}
	return l
}
