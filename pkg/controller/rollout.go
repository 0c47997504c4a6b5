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
	spec, st := &obj.Spec, &obj.Status
	gen := obj.Generation
	st.ObservedGeneration = gen
	hash := templateHash(spec.Template)

	targets := &ctrlv1.TargetClusterList{}
	if err := r.client.List(ctx, targets, client.InNamespace(req.Namespace), client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(spec.ClusterSelector.MatchLabels)}); err != nil {
		return reconcile.Result{}, err
	}
	slices.SortFunc(targets.Items, func(a, b ctrlv1.TargetCluster) int { return strings.Compare(a.Name, b.Name) })
	children := &ctrlv1.PluginInstallationList{}
	if err := r.client.List(ctx, children, client.InNamespace(req.Namespace), client.MatchingLabels{LabelRollout: req.Name}); err != nil {
		return reconcile.Result{}, err
	}
	byCluster := map[string]*ctrlv1.PluginInstallation{}
	for i := range children.Items {
		byCluster[children.Items[i].GetLabels()[LabelCluster]] = &children.Items[i]
	}

	// Clusters no longer selected lose their installation (which uninstalls).
	selected := map[string]bool{}
	for _, t := range targets.Items {
		selected[t.GetName()] = true
	}
	for name, child := range byCluster {
		if !selected[name] && child.GetDeletionTimestamp().IsZero() {
			if err := r.client.Delete(ctx, child); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, err
			}
		}
	}

	type state struct {
		name     string
		phase    string
		msg      string
		current  bool
		child    *ctrlv1.PluginInstallation
		reachble bool
	}
	var states []*state
	for i := range targets.Items {
		t := &targets.Items[i]
		s := &state{name: t.GetName(), child: byCluster[t.GetName()], reachble: true}
		if c := meta.FindStatusCondition(t.Status.Conditions, "Ready"); c != nil && c.Status == metav1.ConditionFalse {
			s.reachble, s.phase, s.msg = false, PhaseUnreachable, c.Message
		}
		if s.child != nil {
			s.current = s.child.GetAnnotations()[AnnotationTemplate] == hash
			if s.reachble {
				s.phase, s.msg = childPhase(s.child)
			}
			if !s.current && s.reachble {
				s.phase = PhasePending
			}
		} else if s.reachble {
			s.phase = PhasePending
		}
		states = append(states, s)
	}

	// A moved cluster that failed halts the rollout.
	var failed []string
	moved, movedReady := 0, 0
	for _, s := range states {
		if s.current && s.reachble {
			moved++
			switch s.phase {
			case PhaseFailed:
				failed = append(failed, s.name+": "+truncate(s.msg, 300))
			case PhaseReady:
				movedReady++
			}
		}
	}
	canary := spec.Strategy.Canary == nil || *spec.Strategy.Canary
	batch := max(spec.Strategy.BatchSize, 1)
	var next []*state
	switch {
	case len(failed) > 0:
	case moved > movedReady: // a stage in progress: wait for it
	default:
		n := batch
		if canary && movedReady == 0 {
			n = 1
		}
		for _, s := range states {
			if len(next) == n {
				break
			}
			if s.reachble && !s.current {
				next = append(next, s)
			}
		}
	}
	for _, s := range next {
		if err := r.moveChild(ctx, obj, spec, hash, s.name, s.child); err != nil {
			return reconcile.Result{}, err
		}
		s.current, s.phase, s.msg = true, PhaseProgressing, "given the current template"
	}

	st.Clusters = st.Clusters[:0]
	pending, unreachable := 0, 0
	for _, s := range states {
		st.Clusters = append(st.Clusters, ctrlv1.RolloutClusterState{Name: s.name, Phase: s.phase, Message: truncate(s.msg, 1000)})
		switch {
		case !s.reachble:
			unreachable++
		case !s.current || s.phase != PhaseReady:
			pending++
		}
	}
	if len(st.Clusters) == 0 {
		st.Clusters = nil
	}
	switch {
	case len(failed) > 0:
		msg := "halted: " + strings.Join(failed, "; ")
		stalled(&st.Conditions, gen, "ClusterFailed", msg)
		return reconcile.Result{RequeueAfter: 30 * time.Second}, nil
	case pending > 0:
		msg := fmt.Sprintf("%d of %d cluster(s) on the current template and Ready", len(states)-pending-unreachable, len(states))
		progressing(&st.Conditions, gen, ReasonProgressing, msg)
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
	}
	msg := fmt.Sprintf("%d cluster(s) on the current template and Ready", len(states)-unreachable)
	if unreachable > 0 {
		msg += fmt.Sprintf("; %d unreachable, passed over", unreachable)
	}
	ready(&st.Conditions, gen, ReasonSucceeded, msg)
	return reconcile.Result{RequeueAfter: time.Minute}, nil
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
