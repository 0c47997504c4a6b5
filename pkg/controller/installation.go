package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

// Finalizer makes deleting an installation uninstall its plugins first.
const Finalizer = "kubeplug.dev/uninstall"

// Condition reasons.
const (
	ReasonSucceeded      = "Succeeded"
	ReasonProgressing    = "Progressing"
	ReasonInvalidSpec    = "InvalidSpec"
	ReasonRefused        = "Refused"
	ReasonApplyFailed    = "ApplyFailed"
	ReasonTargetMissing  = "TargetMissing"
	ReasonDependency     = "DependencyNotReady"
	ReasonSuspended      = "Suspended"
	ReasonUninstalling   = "Uninstalling"
	ReasonStillNeeded    = "StillNeeded"
	ReasonUninstallError = "UninstallFailed"
	// ReasonOwnedByCLI: a plugin of the spec was installed by the CLI, and
	// spec.adopt does not say to take it over.
	ReasonOwnedByCLI = "OwnedByCLI"
	// ReasonAdopted: the installation took over a plugin the CLI installed.
	ReasonAdopted = "Adopted"
	// ReasonMachineContributions: an installed plugin contributes to the
	// machines, which the controller does not apply.
	ReasonMachineContributions = "MachineContributionsNotApplied"
	// ReasonExpansionRefused: an expansion of spec.expansions is not
	// signed by a key its verifyKeys trusts, or does not open.
	ReasonExpansionRefused = "ExpansionRefused"
)

// ConditionMachineNotApplied is True while an installed plugin contributes to
// the machines (control-plane flags, node files, units, labels, taints, hooks,
// cloud resources): the controller applies Kubernetes objects only, so those
// are not applied by it, and they stay where they are (put there by `kubeplug
// up`, or nowhere) when the installation is deleted.
const ConditionMachineNotApplied = "MachineNotApplied"

// What the controller's conditions tell the user to set: fields of the
// installation, not the CLI's flags.
var remedies = deploy.Remedies{
	AllowDowngrade: "set spec.allowDowngrade: true on the installation",
	Adopt:          "set spec.adopt: true on the installation",
}

type installationReconciler struct {
	c      *Controller
	client client.Client
	events recorder.EventRecorder
	renew  renewals
}

func (r *installationReconciler) setup(mgr manager.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).Named("plugininstallation").
		For(&ctrlv1.PluginInstallation{}, builderPredicates()).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.referencing)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.referencing)).
		Watches(&ctrlv1.PluginCatalog{}, handler.EnqueueRequestsFromMapFunc(r.referencing)).
		Watches(&ctrlv1.TargetCluster{}, handler.EnqueueRequestsFromMapFunc(r.referencing)).
		Watches(&ctrlv1.PluginInstallation{}, handler.EnqueueRequestsFromMapFunc(r.dependents)).
		WatchesRawSource(r.c.shardGained(func() client.ObjectList { return &ctrlv1.PluginInstallationList{} }, r.client)).
		WithOptions(opts).
		Complete(r)
}

// builderPredicates reconciles an installation when its spec changes (a new
// generation), its deletion starts, or its labels/annotations change — not on
// its own status writes.
func builderPredicates() builder.ForOption {
	return builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
}

// refsIndex indexes installations, catalogs and targets by what they name ("KIND/NAME"),
// so that an event on a Secret, ConfigMap, catalog, target or installation
// finds the ones to reconcile without reading them all (an informer's handler
// that reads every installation per event would not keep up with thousands).
const refsIndex = "kubeplug.dev/refs"

func ref(kind, name string) string { return kind + "/" + name }

// installationRefs is an installation's index entry.
func installationRefs(o client.Object) []string {
	inst, ok := o.(*ctrlv1.PluginInstallation)
	if !ok {
		return nil
	}
	spec := &inst.Spec
	var out []string
	for _, c := range spec.Catalogs {
		out = append(out, ref("PluginCatalog", c))
	}
	if spec.Target != "" {
		out = append(out, ref("TargetCluster", spec.Target))
	}
	for _, d := range spec.DependsOn {
		out = append(out, ref("PluginInstallation", d))
	}
	out = append(out, expansionRefs(spec.Expansions, spec.ExpansionSite)...)
	for _, p := range spec.Plugins {
		for _, vf := range p.ValuesFrom {
			switch {
			case vf.SecretKeyRef != nil:
				out = append(out, ref("Secret", vf.SecretKeyRef.Name))
			case vf.ConfigMapKeyRef != nil:
				out = append(out, ref("ConfigMap", vf.ConfigMapKeyRef.Name))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// catalogRefs is a catalog's index entry: the ConfigMaps and Secrets it reads.
func catalogRefs(o client.Object) []string {
	cat, ok := o.(*ctrlv1.PluginCatalog)
	if !ok {
		return nil
	}
	var out []string
	for _, s := range cat.Spec.Sources {
		if s.ConfigMap != "" {
			out = append(out, ref("ConfigMap", s.ConfigMap))
		}
		if s.VerifyKeys != "" {
			out = append(out, ref("ConfigMap", s.VerifyKeys))
		}
		if s.Secret != "" {
			out = append(out, ref("Secret", s.Secret))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// kindOf names o's kind: typed objects read from the cache have an empty
// TypeMeta.
func kindOf(o client.Object) string {
	switch o.(type) {
	case *corev1.Secret:
		return "Secret"
	case *corev1.ConfigMap:
		return "ConfigMap"
	case *ctrlv1.PluginCatalog:
		return "PluginCatalog"
	case *ctrlv1.PluginInstallation:
		return "PluginInstallation"
	case *ctrlv1.TargetCluster:
		return "TargetCluster"
	case *ctrlv1.PluginRollout:
		return "PluginRollout"
	case *ctrlv1.ManagedCluster:
		return "ManagedCluster"
	}
	return o.GetObjectKind().GroupVersionKind().Kind
}

// referencing enqueues the installations of o's namespace that name o — a
// Secret or ConfigMap of their values, a catalog, a target — or read it
// through one of their catalogs.
func (r *installationReconciler) referencing(ctx context.Context, o client.Object) []reconcile.Request {
	key := ref(kindOf(o), o.GetName())
	out := r.byRef(ctx, o.GetNamespace(), key)
	if k := kindOf(o); k == "Secret" || k == "ConfigMap" {
		cats := &ctrlv1.PluginCatalogList{}
		if err := r.client.List(ctx, cats, client.InNamespace(o.GetNamespace()), client.MatchingFields{refsIndex: key}); err == nil {
			for i := range cats.Items {
				out = append(out, r.byRef(ctx, o.GetNamespace(), ref("PluginCatalog", cats.Items[i].Name))...)
			}
		}
	}
	return out
}

func (r *installationReconciler) byRef(ctx context.Context, ns, key string) []reconcile.Request {
	return listRequests(ctx, r.client, &ctrlv1.PluginInstallationList{}, client.InNamespace(ns), client.MatchingFields{refsIndex: key})
}

// dependents enqueues the installations that depend on o.
func (r *installationReconciler) dependents(ctx context.Context, o client.Object) []reconcile.Request {
	return r.byRef(ctx, o.GetNamespace(), ref("PluginInstallation", o.GetName()))
}

func request(o client.Object) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}
}

// listRequests lists objects into list (from the cache) and returns a request
// for each; none when the list fails.
func listRequests(ctx context.Context, c client.Client, list client.ObjectList, opts ...client.ListOption) []reconcile.Request {
	if err := c.List(ctx, list, opts...); err != nil {
		return nil
	}
	var out []reconcile.Request
	_ = meta.EachListItem(list, func(o runtime.Object) error { // our lists' items are client.Objects: cannot fail
		if co, ok := o.(client.Object); ok {
			out = append(out, request(co))
		}
		return nil
	})
	return out
}

// targetRefs is a TargetCluster's index entry: its kubeconfig Secret.
func targetRefs(o client.Object) []string {
	tc, ok := o.(*ctrlv1.TargetCluster)
	if !ok || tc.Spec.KubeconfigSecret.Name == "" {
		return nil
	}
	return []string{ref("Secret", tc.Spec.KubeconfigSecret.Name)}
}

// Reconcile brings one installation's plugins to its spec.
func (r *installationReconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, retErr error) {
	obj := &ctrlv1.PluginInstallation{}
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !r.c.owns(targetKey(req.Namespace, obj.Spec.Target)) {
		return reconcile.Result{}, nil // another replica's shard
	}
	if obj.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(obj, Finalizer) {
		// Before the status is touched: Update reads the object back.
		controllerutil.AddFinalizer(obj, Finalizer)
		if err := r.client.Update(ctx, obj); err != nil {
			return reconcile.Result{}, err
		}
	}
	status := newStatusPatcher(r.client, obj)
	defer func() { retErr = status.finish(ctx, obj, retErr) }()
	// The spec as read: status writes on the way leave obj as it is, but the
	// reconcile never reads a spec changed under it.
	spec := obj.Spec.DeepCopy()
	st := &obj.Status
	gen := obj.Generation
	st.ObservedGeneration = gen
	if !obj.DeletionTimestamp.IsZero() {
		return r.remove(ctx, obj, spec)
	}
	if spec.Suspend {
		meta.SetStatusCondition(&st.Conditions, newCondition("Reconciling", metav1.ConditionFalse, gen, ReasonSuspended, "suspended: nothing is applied or corrected until spec.suspend is false"))
		return reconcile.Result{}, nil
	}
	interval := parseDuration(spec.Interval, r.c.opts.DefaultInterval)
	for _, dep := range spec.DependsOn {
		if msg := r.dependencyNotReady(ctx, obj.Namespace, dep); msg != "" {
			progressing(&st.Conditions, gen, ReasonDependency, msg)
			return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
		}
	}
	res, err := r.apply(ctx, obj, spec, status)
	if err == nil && res.RequeueAfter == 0 {
		res.RequeueAfter = interval
	}
	return res, err
}

// apply runs `kubeplug apply` of the installation against its target, and
// records the outcome in obj's status; status writes it on the way when the
// apply brings a change, so that it shows while the apply runs. Its steps:
// reach the target, build the installation, skip when nothing is due, load
// and pull what it uses, say it progresses, run the apply under the cluster's
// lease, and record its failure or success.
func (r *installationReconciler) apply(ctx context.Context, obj *ctrlv1.PluginInstallation, spec *ctrlv1.PluginInstallationSpec, status *statusPatcher) (reconcile.Result, error) {
	st := &obj.Status
	gen := obj.Generation
	tg, err := r.c.targets.get(ctx, obj.GetNamespace(), spec.Target)
	if err != nil {
		if errors.Is(err, ErrTargetMissing) {
			stalled(&st.Conditions, gen, ReasonTargetMissing, err.Error())
			return reconcile.Result{RequeueAfter: time.Minute}, nil
		}
		return reconcile.Result{}, err
	}
	version, err := serverVersion(ctx, tg)
	if err != nil {
		_, msg := unreachable(err)
		failing(&st.Conditions, gen, ReasonApplyFailed, msg)
		return reconcile.Result{}, fmt.Errorf("installation %s: cannot reach its cluster: %w", ownerOf(obj), err)
	}
	b, err := r.c.build(ctx, r.client, obj, spec, tg, version)
	if err != nil {
		return r.refused(obj, ReasonInvalidSpec, err)
	}
	if wait, err := r.notDue(ctx, obj, spec, tg, b); err != nil || wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, err
	}
	if err := b.load(); err != nil {
		return r.refused(obj, ReasonInvalidSpec, err)
	}
	use, applied, err := r.c.pull(ctx, b.passing, spec.Target)
	if err != nil {
		return r.refused(obj, ReasonExpansionRefused, err)
	}
	if err := r.sayProgressing(ctx, obj, status); err != nil {
		return reconcile.Result{}, err
	}
	lctx, release, err := r.c.leases.acquire(ctx, tg.key, tg.client, tg.heads)
	if err != nil {
		failing(&st.Conditions, gen, ReasonApplyFailed, "cannot take the cluster's operation lease: "+err.Error())
		return reconcile.Result{}, err
	}
	defer release()
	a := r.newApply(obj, spec, tg, use)
	var adopting []string
	if spec.Adopt {
		if adopting, err = r.cliPlugins(lctx, tg, spec); err != nil {
			return reconcile.Result{}, err
		}
	}
	res, l := a.Run(lctx, b.cluster)
	st.KubernetesVersion = version
	if l.HasFatal() {
		return r.applyFailed(ctx, obj, tg, b, l)
	}
	return r.applied(ctx, obj, spec, tg, b, status, res, applied, adopting)
}

// serverVersion is the target's Kubernetes version, without its "v" and
// its pre-release or build suffix.
func serverVersion(ctx context.Context, tg *target) (string, error) {
	vctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	version, err := tg.client.ServerVersion(vctx)
	cancel()
	if err != nil {
		return "", err
	}
	version = strings.TrimPrefix(version, "v")
	if i := strings.IndexAny(version, "+-"); i > 0 {
		version = version[:i]
	}
	return version, nil
}

// refused records err of building, loading or pulling the installation: a
// specError stalls it with reason and an event (retrying does not help until
// a new spec), any other error fails it, to be retried.
func (r *installationReconciler) refused(obj *ctrlv1.PluginInstallation, reason string, err error) (reconcile.Result, error) {
	st := &obj.Status
	var se *specError
	if errors.As(err, &se) {
		stalled(&st.Conditions, obj.Generation, reason, se.msg)
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Apply", "%s", se.msg)
		return reconcile.Result{}, nil
	}
	failing(&st.Conditions, obj.Generation, ReasonApplyFailed, err.Error())
	return reconcile.Result{}, err
}

// notDue says how long to wait when nothing changed since the last apply
// (a controller restart, an unrelated watch event): until the interval is up
// or the serving certificates are due, whichever is first (always positive);
// zero when an apply is due now.
func (r *installationReconciler) notDue(ctx context.Context, obj *ctrlv1.PluginInstallation, spec *ctrlv1.PluginInstallationSpec, tg *target, b *built) (time.Duration, error) {
	st := &obj.Status
	if !meta.IsStatusConditionTrue(st.Conditions, "Ready") || st.LastAppliedGeneration != obj.Generation || st.LastAppliedDigest != b.digest {
		return 0, nil
	}
	last, err := time.Parse(time.RFC3339, st.LastAppliedTime)
	if err != nil {
		return 0, nil
	}
	left := parseDuration(spec.Interval, r.c.opts.DefaultInterval) - time.Since(last)
	if left <= 0 {
		return 0, nil
	}
	due, err := r.renewalDue(ctx, tg, ownerOf(obj))
	if err != nil {
		return 0, err
	}
	if due.IsZero() || time.Now().Before(due) {
		return untilRenewal(left, due), nil
	}
	r.c.opts.Logger.Info("serving certificates due: applying to renew them", "installation", ownerOf(obj), "due", due)
	return 0, nil
}

// sayProgressing writes a Progressing condition before a change is applied
// (not a drift check, nor a retry of a generation that stalled), so that it
// shows while the apply runs.
func (r *installationReconciler) sayProgressing(ctx context.Context, obj *ctrlv1.PluginInstallation, status *statusPatcher) error {
	st, gen := &obj.Status, obj.Generation
	stall := meta.FindStatusCondition(st.Conditions, "Stalled")
	if st.LastAppliedGeneration == gen || meta.IsStatusConditionTrue(st.Conditions, "Reconciling") || stall != nil && stall.ObservedGeneration == gen {
		return nil
	}
	progressing(&st.Conditions, gen, ReasonProgressing, "applying generation "+fmt.Sprint(gen))
	return status.patch(ctx, obj)
}

// newApply is the apply of the installation to its target, with the
// expansions use: rolled back on failure, taking drift back, under the
// lease the controller holds.
func (r *installationReconciler) newApply(obj *ctrlv1.PluginInstallation, spec *ctrlv1.PluginInstallationSpec, tg *target, use action.ExpansionUse) *action.Apply {
	cfg := *r.c.opts.Action
	cfg.Expansions = use
	if p := r.c.opts.ServingCerts; p.CAValidity > 0 || p.CertValidity > 0 || p.Now != nil {
		cfg.ServingCerts = p
	}
	a := action.NewApply(&cfg)
	a.Target.RESTConfig = tg.config
	a.Timeout = parseDuration(spec.Timeout, 5*time.Minute)
	a.RollbackOnFailure = true
	// The installation is the truth: drift is taken back from whoever made it,
	// as GitOps controllers apply.
	a.ForceConflicts = true
	a.AllowDowngrade = spec.AllowDowngrade
	a.Owner = ownerOf(obj)
	a.Adopt = spec.Adopt
	a.Remedies = remedies
	a.Lease = action.Lease{External: true}
	a.Client = tg.client
	a.Heads = tg.heads
	return a
}

// applyFailed records an apply that failed with l's fatal diagnostics: it
// stalls when retrying does not help until a new spec or package (the
// message says so, or a diagnostic is located in a file), else fails, to be
// retried.
func (r *installationReconciler) applyFailed(ctx context.Context, obj *ctrlv1.PluginInstallation, tg *target, b *built, l diag.List) (reconcile.Result, error) {
	st, gen := &obj.Status, obj.Generation
	msg := describe(l, b.file)
	reason, stall := classify(msg)
	for _, d := range l.Fatal() {
		if d.File != "" && d.Line > 0 && !stall {
			// Located in a file (a package's template, a values file): retrying
			// does not help until a new spec or package.
			reason, stall = ReasonInvalidSpec, true
		}
	}
	if stall {
		stalled(&st.Conditions, gen, reason, msg)
	} else {
		failing(&st.Conditions, gen, reason, msg)
	}
	r.events.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Apply", "%s", truncate(msg, 1000))
	r.c.opts.Logger.Warn("installation not applied", "installation", ownerOf(obj), "reason", reason, "error", msg)
	if _, err := r.readPlugins(ctx, tg, obj, st); err != nil {
		return reconcile.Result{}, err
	}
	if stall {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, errors.New(truncate(msg, 300))
}

// applied records a successful apply: the plugins installed, the next
// renewal of serving certificates, the plugins adopted from the CLI, the
// expansions applied, and Ready; an event says what changed, if anything.
func (r *installationReconciler) applied(ctx context.Context, obj *ctrlv1.PluginInstallation, spec *ctrlv1.PluginInstallationSpec, tg *target, b *built, status *statusPatcher, res *action.ApplyResult, applied []ctrlv1.AppliedExpansion, adopting []string) (reconcile.Result, error) {
	st, gen := &obj.Status, obj.Generation
	recs, err := r.readPlugins(ctx, tg, obj, st)
	if err != nil {
		return reconcile.Result{}, err
	}
	due, err := nextRenewal(ctx, tg, recs)
	if err != nil {
		return reconcile.Result{}, err
	}
	r.renew.set(ownerOf(obj), due)
	for _, p := range adopting {
		if slices.ContainsFunc(recs, func(rec *deploy.Record) bool { return rec.Plugin == p }) {
			r.events.Eventf(obj, nil, corev1.EventTypeNormal, ReasonAdopted, "Apply", "adopted plugin %s, which the CLI installed (spec.adopt): the installation manages it now, and deleting the installation uninstalls it", p)
		}
	}
	r.machineCondition(obj, recs)
	var names []string
	for _, p := range st.Plugins {
		names = append(names, fmt.Sprintf("%s %s (revision %d)", p.Name, p.Version, p.Revision))
	}
	msg := "installed " + strings.Join(names, ", ")
	if len(names) == 0 {
		msg = "nothing to install"
	}
	msg += passedMessage(b.passing, applied)
	st.Expansions = applied
	if len(spec.Expansions) > 0 {
		// The object may have been read before the last write of
		// status.expansions reached the cache, so that it already looks as
		// it should: the patch carries the list all the same.
		status.resend(func(o client.Object) {
			o.(*ctrlv1.PluginInstallation).Status.Expansions = []ctrlv1.AppliedExpansion{{Ref: "\x00"}}
		})
	}
	changed := st.LastAppliedGeneration != gen || res.Applied > 0 || res.Pruned > 0 || len(res.Removed) > 0
	ready(&st.Conditions, gen, ReasonSucceeded, msg)
	st.LastAppliedGeneration, st.LastAppliedDigest, st.LastAppliedTime = gen, b.digest, now()
	if changed {
		r.c.opts.Logger.Info("installation applied", "installation", ownerOf(obj), "cluster", tg.key, "replica", r.c.opts.ReplicaID)
		r.events.Eventf(obj, nil, corev1.EventTypeNormal, ReasonSucceeded, "Apply", "%s; %d object(s) applied, %d pruned, removed %v", msg, res.Applied, res.Pruned, res.Removed)
	}
	return reconcile.Result{RequeueAfter: untilRenewal(parseDuration(spec.Interval, r.c.opts.DefaultInterval), due)}, nil
}

// readPlugins fills the status's plugins from the release records the
// installation owns, and returns those records.
func (r *installationReconciler) readPlugins(ctx context.Context, tg *target, obj client.Object, st *ctrlv1.PluginInstallationStatus) ([]*deploy.Record, error) {
	d, err := deploy.New(tg.config, deploy.Options{Owner: ownerOf(obj), Client: tg.client, Heads: tg.heads})
	if err != nil {
		return nil, err
	}
	recs, err := d.Owned(ctx)
	if err != nil {
		return nil, err
	}
	st.Plugins = st.Plugins[:0]
	for _, rec := range recs {
		st.Plugins = append(st.Plugins, ctrlv1.PluginState{Name: rec.Plugin, Version: rec.Version, Revision: rec.Revision, Ready: rec.Phase == deploy.PhaseReady})
	}
	slices.SortFunc(st.Plugins, func(a, b ctrlv1.PluginState) int { return strings.Compare(a.Name, b.Name) })
	if len(st.Plugins) == 0 {
		st.Plugins = nil
	}
	return recs, nil
}

// cliPlugins names the plugins of spec that the CLI installed: the ones an
// adopting apply takes over.
func (r *installationReconciler) cliPlugins(ctx context.Context, tg *target, spec *ctrlv1.PluginInstallationSpec) ([]string, error) {
	d, err := deploy.New(tg.config, deploy.Options{Client: tg.client, Heads: tg.heads})
	if err != nil {
		return nil, err
	}
	recs, err := d.Owned(ctx) // no owner: the CLI's
	if err != nil {
		return nil, err
	}
	var out []string
	for _, rec := range recs {
		if slices.ContainsFunc(spec.Plugins, func(p ctrlv1.InstalledPlugin) bool { return p.Name == rec.Plugin }) {
			out = append(out, rec.Plugin)
		}
	}
	return out, nil
}

// machineCondition says, as a condition and (when it changes) an event, which
// installed plugins contribute to the machines: the controller applies their
// Kubernetes objects, never those contributions.
func (r *installationReconciler) machineCondition(obj *ctrlv1.PluginInstallation, recs []*deploy.Record) {
	st := &obj.Status
	msg := machineMessage(recs)
	if msg == "" {
		meta.RemoveStatusCondition(&st.Conditions, ConditionMachineNotApplied)
		return
	}
	if prev := meta.FindStatusCondition(st.Conditions, ConditionMachineNotApplied); prev == nil || prev.Message != msg {
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, ReasonMachineContributions, "Apply", "%s", truncate(msg, 1000))
	}
	meta.SetStatusCondition(&st.Conditions, newCondition(ConditionMachineNotApplied, metav1.ConditionTrue, obj.Generation, ReasonMachineContributions, msg))
}

// machineMessage says what of recs' plugins the controller does not apply:
// their machine contributions; "" when they have none.
func machineMessage(recs []*deploy.Record) string {
	var parts []string
	for _, rec := range recs {
		if len(rec.Machine) > 0 {
			parts = append(parts, fmt.Sprintf("plugin %s (%s)", rec.Plugin, strings.Join(rec.Machine, ", ")))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "the controller applies Kubernetes objects only; it did not apply the machine contributions of " + strings.Join(parts, "; ") +
		". Bring the machines to them with the cluster's provider (kubeplug up with a cluster file that enables the plugin); " +
		"deleting this installation leaves them as they are"
}

// remove uninstalls an installation being deleted, in reverse dependency
// order, and then lets it go; while another installation depends on it, or
// another owner's plugin requires one of its plugins, it stays with a
// condition saying why.
func (r *installationReconciler) remove(ctx context.Context, obj *ctrlv1.PluginInstallation, spec *ctrlv1.PluginInstallationSpec) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return reconcile.Result{}, nil
	}
	st := &obj.Status
	gen := obj.Generation
	if users := r.dependentNames(ctx, obj); len(users) > 0 {
		msg := fmt.Sprintf("cannot uninstall: installation(s) %s depend on it; delete them first", strings.Join(users, ", "))
		stalled(&st.Conditions, gen, ReasonStillNeeded, msg)
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, ReasonStillNeeded, "Uninstall", "%s", msg)
		return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
	}
	tg, err := r.c.targets.get(ctx, obj.GetNamespace(), spec.Target)
	switch {
	case errors.Is(err, ErrTargetMissing):
		// The cluster is gone from the controller's view: nothing to uninstall from.
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, ReasonTargetMissing, "Uninstall", "%v; its plugins are left as they are", err)
	case err != nil:
		return reconcile.Result{}, err
	default:
		lctx, release, err := r.c.leases.acquire(ctx, tg.key, tg.client, tg.heads)
		if err != nil {
			return reconcile.Result{}, err
		}
		d, err := deploy.New(tg.config, deploy.Options{Owner: ownerOf(obj), Client: tg.client, Heads: tg.heads, Timeout: parseDuration(spec.Timeout, 5*time.Minute)})
		if err != nil {
			release()
			return reconcile.Result{}, err
		}
		recs, err := d.Owned(lctx)
		if err != nil {
			release()
			return reconcile.Result{}, err
		}
		var names []string
		for _, rec := range recs {
			names = append(names, rec.Plugin)
		}
		var removed []string
		if len(names) > 0 {
			progressing(&st.Conditions, gen, ReasonUninstalling, "uninstalling "+strings.Join(names, ", "))
			removed, err = d.Uninstall(lctx, names, false)
		}
		release()
		if err != nil {
			msg := "cannot uninstall: " + err.Error()
			stalled(&st.Conditions, gen, ReasonUninstallError, msg)
			r.events.Eventf(obj, nil, corev1.EventTypeWarning, ReasonUninstallError, "Uninstall", "%s", truncate(msg, 1000))
			return reconcile.Result{RequeueAfter: 15 * time.Second}, nil
		}
		r.events.Eventf(obj, nil, corev1.EventTypeNormal, ReasonUninstalling, "Uninstall", "uninstalled %v", removed)
		if msg := machineMessage(recs); msg != "" {
			r.events.Eventf(obj, nil, corev1.EventTypeWarning, ReasonMachineContributions, "Uninstall",
				"uninstalled the Kubernetes objects only: %s", truncate(msg, 900))
		}
	}
	controllerutil.RemoveFinalizer(obj, Finalizer)
	if err := r.client.Update(ctx, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{}, errGone // the object is gone: no status to write
}

// dependentNames lists the installations (not being deleted) that depend on obj.
func (r *installationReconciler) dependentNames(ctx context.Context, obj client.Object) []string {
	var out []string
	for _, req := range r.dependents(ctx, obj) {
		dep := &ctrlv1.PluginInstallation{}
		if r.client.Get(ctx, req.NamespacedName, dep) == nil && dep.DeletionTimestamp.IsZero() {
			out = append(out, req.Name)
		}
	}
	slices.Sort(out)
	return out
}

// dependencyNotReady says why installation name is not ready for its
// dependents; "" when it is.
func (r *installationReconciler) dependencyNotReady(ctx context.Context, ns, name string) string {
	dep := &ctrlv1.PluginInstallation{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, dep); err != nil {
		return fmt.Sprintf("waiting for installation %s: %v", name, client.IgnoreNotFound(err))
	}
	if !meta.IsStatusConditionTrue(dep.Status.Conditions, "Ready") || dep.Status.LastAppliedGeneration != dep.Generation {
		return "waiting for installation " + name + " to be Ready"
	}
	return ""
}

// classify says which reason a failed apply has, and whether retrying can help
// without an edit (stall is true when it cannot).
func classify(msg string) (reason string, stall bool) {
	switch {
	case strings.Contains(msg, "managed by the CLI"):
		return ReasonOwnedByCLI, true
	case strings.Contains(msg, "downgrade"), strings.Contains(msg, "managed by PluginInstallation"),
		strings.Contains(msg, "needs Kubernetes"), strings.Contains(msg, "no version supports Kubernetes"):
		return ReasonRefused, true
	case strings.Contains(msg, "cannot reach"), strings.Contains(msg, "did not answer"), strings.Contains(msg, "not ready after"),
		strings.Contains(msg, "cannot fetch"), strings.Contains(msg, "connection refused"), strings.Contains(msg, "timeout"):
		return ReasonApplyFailed, false
	case strings.Contains(msg, "spec.plugins"), strings.Contains(msg, "schema"), strings.Contains(msg, "cannot resolve"):
		return ReasonInvalidSpec, true
	}
	return ReasonApplyFailed, false
}

// The kstatus conditions: Reconciling and Stalled exclude each other, and Ready
// is False while either is True. Every change of them goes through
// progressing, stalled, failing or ready, each of which keeps those rules.

// progressing marks an installation whose change is being applied (or that
// waits for what it depends on).
func progressing(conds *[]metav1.Condition, gen int64, reason, msg string) {
	meta.SetStatusCondition(conds, newCondition("Ready", metav1.ConditionFalse, gen, reason, msg))
	meta.SetStatusCondition(conds, newCondition("Reconciling", metav1.ConditionTrue, gen, reason, msg))
	meta.RemoveStatusCondition(conds, "Stalled")
}

// ready marks an installation whose spec is applied.
func ready(conds *[]metav1.Condition, gen int64, reason, msg string) {
	meta.SetStatusCondition(conds, newCondition("Ready", metav1.ConditionTrue, gen, reason, msg))
	meta.RemoveStatusCondition(conds, "Reconciling")
	meta.RemoveStatusCondition(conds, "Stalled")
}

// stalled marks an installation that cannot progress until edited.
func stalled(conds *[]metav1.Condition, gen int64, reason, msg string) {
	meta.SetStatusCondition(conds, newCondition("Ready", metav1.ConditionFalse, gen, reason, msg))
	meta.SetStatusCondition(conds, newCondition("Stalled", metav1.ConditionTrue, gen, reason, msg))
	meta.RemoveStatusCondition(conds, "Reconciling")
}

// failing marks an installation whose apply failed and is retried.
func failing(conds *[]metav1.Condition, gen int64, reason, msg string) {
	meta.SetStatusCondition(conds, newCondition("Ready", metav1.ConditionFalse, gen, reason, msg))
	meta.SetStatusCondition(conds, newCondition("Reconciling", metav1.ConditionTrue, gen, reason, "retrying: "+truncate(msg, 1000)))
	meta.RemoveStatusCondition(conds, "Stalled")
}

func parseDuration(s string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d
	}
	return def
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
