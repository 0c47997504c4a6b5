package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
)

// Labels and annotations of the installations a rollout makes.
const (
	LabelRollout       = "kubeplug.dev/rollout"
	LabelCluster       = "kubeplug.dev/target-cluster"
	AnnotationTemplate = "kubeplug.dev/template-hash"
)

// Phases of a cluster in a rollout.
const (
	PhasePending     = "Pending"
	PhaseProgressing = "Progressing"
	PhaseReady       = "Ready"
	PhaseFailed      = "Failed"
	PhaseUnreachable = "Unreachable"
)

// rolloutReconciler keeps one PluginInstallation per selected TargetCluster,
// moving them to the rollout's template a stage at a time: one canary, then
// BatchSize clusters at once, each stage only once the clusters already moved
// are Ready. A moved cluster that fails halts the rollout (Stalled); an
// unreachable cluster is marked and passed over.
type rolloutReconciler struct {
	c      *Controller
	client client.Client
}

func (r *rolloutReconciler) setup(mgr manager.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("pluginrollout").
		For(&ctrlv1.PluginRollout{}).
		Owns(&ctrlv1.PluginInstallation{}).
		Watches(&ctrlv1.TargetCluster{}, handler.EnqueueRequestsFromMapFunc(r.all)).
		WatchesRawSource(r.c.shardGained(func() client.ObjectList { return &ctrlv1.PluginRolloutList{} }, r.client)).
		WithOptions(controller.Options{SkipNameValidation: ptr(true)}).
		Complete(r)
}

// all enqueues every rollout of o's namespace (a TargetCluster came, went or
// changed its labels).
func (r *rolloutReconciler) all(ctx context.Context, o client.Object) []reconcile.Request {
	return listRequests(ctx, r.client, &ctrlv1.PluginRolloutList{}, client.InNamespace(o.GetNamespace()))
}

// templateHash identifies a template: a child with another hash is out of date.
func templateHash(t ctrlv1.PluginInstallationSpec) string {
	raw, _ := json.Marshal(t) // plain JSON types: cannot fail
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])[:16]
}

// Reconcile moves a rollout one step, as a list of named steps: find the
// selected clusters and their installations, drop those no longer selected,
// read each cluster's state, pick the next stage (none while one is in
// progress or after a failure), give it the current template, and report.
func (r *rolloutReconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, retErr error) {
	if !r.c.owns(req.String()) {
		return reconcile.Result{}, nil // another replica's shard
	}
	obj := &ctrlv1.PluginRollout{}
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil // the children go with it (owner references)
	}
	status := newStatusPatcher(r.client, obj)
	defer func() { retErr = status.finish(ctx, obj, retErr) }()
	obj.Status.ObservedGeneration = obj.Generation
	hash := templateHash(obj.Spec.Template)

	targets, byCluster, err := r.selection(ctx, obj)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.dropUnselected(ctx, targets, byCluster); err != nil {
		return reconcile.Result{}, err
	}
	states := clusterStates(targets, byCluster, hash)
	next, failed := nextStage(states, obj.Spec.Strategy)
	for _, s := range next {
		if err := r.moveChild(ctx, obj, &obj.Spec, hash, s.name, s.child); err != nil {
			return reconcile.Result{}, err
		}
		s.current, s.phase, s.msg = true, PhaseProgressing, "given the current template"
	}
	return reportRollout(&obj.Status, obj.Generation, states, failed), nil
}

// rolloutCluster is one selected cluster's place in a rollout.
type rolloutCluster struct {
	name      string
	phase     string
	msg       string
	current   bool // its installation has the current template
	child     *ctrlv1.PluginInstallation
	reachable bool
}

// selection lists the TargetClusters the rollout's selector matches, sorted
// by name, and its installations by cluster name.
func (r *rolloutReconciler) selection(ctx context.Context, obj *ctrlv1.PluginRollout) ([]ctrlv1.TargetCluster, map[string]*ctrlv1.PluginInstallation, error) {
	targets := &ctrlv1.TargetClusterList{}
	sel := client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(obj.Spec.ClusterSelector.MatchLabels)}
	if err := r.client.List(ctx, targets, client.InNamespace(obj.Namespace), sel); err != nil {
		return nil, nil, err
	}
	slices.SortFunc(targets.Items, func(a, b ctrlv1.TargetCluster) int { return strings.Compare(a.Name, b.Name) })
	children := &ctrlv1.PluginInstallationList{}
	if err := r.client.List(ctx, children, client.InNamespace(obj.Namespace), client.MatchingLabels{LabelRollout: obj.Name}); err != nil {
		return nil, nil, err
	}
	byCluster := map[string]*ctrlv1.PluginInstallation{}
	for i := range children.Items {
		byCluster[children.Items[i].GetLabels()[LabelCluster]] = &children.Items[i]
	}
	return targets.Items, byCluster, nil
}

// dropUnselected deletes the installation of every cluster no longer
// selected (which uninstalls its plugins there).
func (r *rolloutReconciler) dropUnselected(ctx context.Context, targets []ctrlv1.TargetCluster, byCluster map[string]*ctrlv1.PluginInstallation) error {
	selected := map[string]bool{}
	for _, t := range targets {
		selected[t.GetName()] = true
	}
	for name, child := range byCluster {
		if selected[name] || !child.GetDeletionTimestamp().IsZero() {
			continue
		}
		if err := r.client.Delete(ctx, child); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// clusterStates reads where each selected cluster is: unreachable (its
// TargetCluster is not Ready), pending (no installation, or one with an old
// template), or its installation's phase.
func clusterStates(targets []ctrlv1.TargetCluster, byCluster map[string]*ctrlv1.PluginInstallation, hash string) []*rolloutCluster {
	var states []*rolloutCluster
	for i := range targets {
		t := &targets[i]
		s := &rolloutCluster{name: t.GetName(), child: byCluster[t.GetName()], reachable: true, phase: PhasePending}
		if c := meta.FindStatusCondition(t.Status.Conditions, "Ready"); c != nil && c.Status == metav1.ConditionFalse {
			s.reachable, s.phase, s.msg = false, PhaseUnreachable, c.Message
		}
		if s.child != nil {
			s.current = s.child.GetAnnotations()[AnnotationTemplate] == hash
			if s.reachable && s.current {
				s.phase, s.msg = childPhase(s.child)
			} else if s.reachable {
				_, s.msg = childPhase(s.child)
			}
		}
		states = append(states, s)
	}
	return states
}

// nextStage picks the clusters to give the current template now: none after
// a moved cluster failed (they are returned, to halt the rollout) or while a
// stage is in progress; else the canary (one cluster, when none has moved
// yet and the strategy has one), else the next batch.
func nextStage(states []*rolloutCluster, strategy ctrlv1.RolloutStrategy) (next []*rolloutCluster, failed []string) {
	moved, movedReady := 0, 0
	for _, s := range states {
		if !s.current || !s.reachable {
			continue
		}
		moved++
		switch s.phase {
		case PhaseFailed:
			failed = append(failed, s.name+": "+truncate(s.msg, 300))
		case PhaseReady:
			movedReady++
		}
	}
	if len(failed) > 0 || moved > movedReady {
		return nil, failed
	}
	n := max(strategy.BatchSize, 1)
	if (strategy.Canary == nil || *strategy.Canary) && movedReady == 0 {
		n = 1
	}
	for _, s := range states {
		if len(next) < n && s.reachable && !s.current {
			next = append(next, s)
		}
	}
	return next, nil
}

// reportRollout writes the clusters' states and the rollout's condition, and
// says when to look again.
func reportRollout(st *ctrlv1.PluginRolloutStatus, gen int64, states []*rolloutCluster, failed []string) reconcile.Result {
	st.Clusters = nil
	pending, unreachable := 0, 0
	for _, s := range states {
		st.Clusters = append(st.Clusters, ctrlv1.RolloutClusterState{Name: s.name, Phase: s.phase, Message: truncate(s.msg, 1000)})
		switch {
		case !s.reachable:
			unreachable++
		case !s.current || s.phase != PhaseReady:
			pending++
		}
	}
	switch {
	case len(failed) > 0:
		stalled(&st.Conditions, gen, "ClusterFailed", "halted: "+strings.Join(failed, "; "))
		return reconcile.Result{RequeueAfter: 30 * time.Second}
	case pending > 0:
		msg := fmt.Sprintf("%d of %d cluster(s) on the current template and Ready", len(states)-pending-unreachable, len(states))
		progressing(&st.Conditions, gen, ReasonProgressing, msg)
		return reconcile.Result{RequeueAfter: 5 * time.Second}
	}
	msg := fmt.Sprintf("%d cluster(s) on the current template and Ready", len(states)-unreachable)
	if unreachable > 0 {
		msg += fmt.Sprintf("; %d unreachable, passed over", unreachable)
	}
	ready(&st.Conditions, gen, ReasonSucceeded, msg)
	return reconcile.Result{RequeueAfter: time.Minute}
}

// childPhase reads an installation's conditions as a rollout phase.
func childPhase(child *ctrlv1.PluginInstallation) (string, string) {
	st := &child.Status
	ready := meta.FindStatusCondition(st.Conditions, "Ready")
	switch {
	case ready == nil:
		return PhaseProgressing, "not reconciled yet"
	case ready.Status == metav1.ConditionTrue && st.LastAppliedGeneration == child.Generation:
		return PhaseReady, ready.Message
	case meta.FindStatusCondition(st.Conditions, "Stalled") != nil,
		ready.Status == metav1.ConditionFalse && ready.Reason == ReasonApplyFailed && st.ObservedGeneration == child.Generation:
		return PhaseFailed, ready.Message
	}
	return PhaseProgressing, ready.Message
}

// moveChild creates or updates the installation of cluster with the template.
func (r *rolloutReconciler) moveChild(ctx context.Context, ro *ctrlv1.PluginRollout, spec *ctrlv1.PluginRolloutSpec, hash, cluster string, child *ctrlv1.PluginInstallation) error {
	tmpl := spec.Template.DeepCopy()
	tmpl.Target = cluster
	if child == nil {
		child = &ctrlv1.PluginInstallation{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ro.Namespace,
				Name:      childName(ro.Name, cluster),
				Labels:    map[string]string{LabelRollout: ro.Name, LabelCluster: cluster},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: ctrlv1.GroupVersion.String(), Kind: "PluginRollout", Name: ro.Name, UID: ro.UID,
					Controller: ptr(true), BlockOwnerDeletion: ptr(true),
				}},
				Annotations: map[string]string{AnnotationTemplate: hash},
			},
			Spec: *tmpl,
		}
		err := r.client.Create(ctx, child)
		if apierrors.IsAlreadyExists(err) {
			return nil // the cache was behind: the next reconcile sees it
		}
		return err
	}
	ann := child.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationTemplate] = hash
	child.SetAnnotations(ann)
	child.Spec = *tmpl
	return r.client.Update(ctx, child)
}

// childName names a rollout's installation for a cluster.
func childName(rollout, cluster string) string {
	name := rollout + "-" + cluster
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:236] + "-" + hex.EncodeToString(sum[:])[:16]
}
