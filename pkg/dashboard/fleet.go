package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
)

// The controller's resources the fleet page shows (api/controller/v1alpha1).
var (
	targetsGVR       = schema.GroupVersionResource{Group: ctrlv1.Group, Version: ctrlv1.Version, Resource: "targetclusters"}
	installationsGVR = schema.GroupVersionResource{Group: ctrlv1.Group, Version: ctrlv1.Version, Resource: "plugininstallations"}
	rolloutsGVR      = schema.GroupVersionResource{Group: ctrlv1.Group, Version: ctrlv1.Version, Resource: "pluginrollouts"}
)

// AnnotationRetry is what the dashboard's "retry" sets, to the time, on a
// PluginRollout and on its installations that are not Ready: a change of an
// installation's annotations makes the controller reconcile it again, and any
// change of a rollout does.
const AnnotationRetry = "kubeplug.dev/retry"

type conditionRow struct{ Type, Status, Reason, Message string }

type targetRow struct {
	Namespace, Name, Version string
	Ready                    string
	Conditions               []conditionRow
}

type installationRow struct {
	Namespace, Name, Target string
	// Phase is Suspended, Ready, Stalled, Reconciling or Unknown, from the
	// conditions (kstatus).
	Phase      string
	Suspended  bool
	Plugins    []string
	Conditions []conditionRow
}

type rolloutClusterRow struct{ Name, Phase, Message string }

type rolloutRow struct {
	Namespace, Name string
	Phase           string
	Canary          bool
	BatchSize       int
	Clusters        []rolloutClusterRow
	// Failures name each failed cluster and why.
	Failures   []string
	Conditions []conditionRow
}

type fleetData struct {
	page
	// NoFleet says the cluster has not the controller's CRDs.
	NoFleet       bool
	Targets       []targetRow
	Installations []installationRow
	Rollouts      []rolloutRow
}

func conditionRows(cs []metav1.Condition) []conditionRow {
	out := make([]conditionRow, 0, len(cs))
	for _, c := range cs {
		out = append(out, conditionRow{c.Type, string(c.Status), c.Reason, c.Message})
	}
	return out
}

// phaseOf is a kstatus phase from conditions: Stalled, Reconciling, Ready, or
// NotReady when Ready is False, Unknown without any.
func phaseOf(cs []metav1.Condition) string {
	get := func(t string) string {
		if c := meta.FindStatusCondition(cs, t); c != nil {
			return string(c.Status)
		}
		return ""
	}
	switch {
	case get("Stalled") == "True":
		return "Stalled"
	case get("Reconciling") == "True":
		return "Reconciling"
	case get("Ready") == "True":
		return "Ready"
	case get("Ready") == "False":
		return "NotReady"
	}
	return "Unknown"
}

// typed converts what the dynamic client read into the controller's type:
// the one place the fleet page leaves unstructured objects. What does not fit
// the type is left out (the page shows what it can).
func typed(u *unstructured.Unstructured, into runtime.Object) {
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

// fleet reads the controller's resources, in every namespace the user may
// list, with the user's credentials. No Secret is read: a TargetCluster only
// names its kubeconfig Secret.
func (s *Server) fleet(ctx context.Context, d *fleetData) {
	list := func(gvr schema.GroupVersionResource) []unstructured.Unstructured {
		l, err := s.dyn.Resource(gvr).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		switch {
		case err == nil:
			sort.Slice(l.Items, func(i, j int) bool {
				a, b := l.Items[i], l.Items[j]
				return a.GetNamespace()+"/"+a.GetName() < b.GetNamespace()+"/"+b.GetName()
			})
			return l.Items
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			d.NoFleet = true
		default:
			d.Problems = append(d.Problems, fmt.Sprintf("listing %s: %v", gvr.Resource, err))
		}
		return nil
	}
	for _, u := range list(targetsGVR) {
		var tc ctrlv1.TargetCluster
		typed(&u, &tc)
		st := &tc.Status
		ready := "Unknown"
		for _, c := range st.Conditions {
			if c.Type == "Ready" {
				ready = map[metav1.ConditionStatus]string{metav1.ConditionTrue: "Ready", metav1.ConditionFalse: "Unreachable"}[c.Status]
				if ready == "" {
					ready = "Unknown"
				}
			}
		}
		d.Targets = append(d.Targets, targetRow{Namespace: u.GetNamespace(), Name: u.GetName(), Version: st.KubernetesVersion, Ready: ready, Conditions: conditionRows(st.Conditions)})
	}
	for _, u := range list(installationsGVR) {
		var inst ctrlv1.PluginInstallation
		typed(&u, &inst)
		spec, st := &inst.Spec, &inst.Status
		row := installationRow{Namespace: u.GetNamespace(), Name: u.GetName(), Target: spec.Target, Suspended: spec.Suspend, Phase: phaseOf(st.Conditions), Conditions: conditionRows(st.Conditions)}
		if row.Target == "" {
			row.Target = "(the controller's cluster)"
		}
		if spec.Suspend {
			row.Phase = "Suspended"
		}
		for _, p := range st.Plugins {
			ready := "not ready"
			if p.Ready {
				ready = "ready"
			}
			row.Plugins = append(row.Plugins, fmt.Sprintf("%s %s (%s)", p.Name, p.Version, ready))
		}
		d.Installations = append(d.Installations, row)
	}
	for _, u := range list(rolloutsGVR) {
		var ro ctrlv1.PluginRollout
		typed(&u, &ro)
		spec, st := &ro.Spec, &ro.Status
		row := rolloutRow{Namespace: u.GetNamespace(), Name: u.GetName(), Phase: phaseOf(st.Conditions), Canary: spec.Strategy.Canary == nil || *spec.Strategy.Canary, BatchSize: max(spec.Strategy.BatchSize, 1), Conditions: conditionRows(st.Conditions)}
		for _, c := range st.Clusters {
			row.Clusters = append(row.Clusters, rolloutClusterRow(c))
			if c.Phase == "Failed" || c.Phase == "Unreachable" {
				row.Failures = append(row.Failures, c.Name+": "+c.Message)
			}
		}
		d.Rollouts = append(d.Rollouts, row)
	}
	if d.NoFleet {
		d.Problems = nil
	}
}

func (s *Server) fleetPage(w http.ResponseWriter, r *http.Request) {
	d := fleetData{page: s.page(r, "Fleet", "fleet")}
	s.fleet(r.Context(), &d)
	s.render(w, http.StatusOK, "fleet.html", d)
}

func (s *Server) fleetFragment(w http.ResponseWriter, r *http.Request) {
	d := fleetData{page: s.page(r, "Fleet", "fleet")}
	s.fleet(r.Context(), &d)
	s.render(w, http.StatusOK, "fleet", d)
}

// fleetWatches follows the controller's resources through the API server's
// watch, when the cluster has them; a cluster without them has nothing to
// follow (the fleet page says so).
func (s *Server) fleetWatches(ctx context.Context, poke func(any)) dynamicinformer.DynamicSharedInformerFactory {
	f := dynamicinformer.NewDynamicSharedInformerFactory(s.dyn, 0)
	for _, gvr := range []schema.GroupVersionResource{targetsGVR, installationsGVR, rolloutsGVR} {
		if _, err := s.dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			if !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
				s.opts.Logger.Warn("cannot watch the fleet", "resource", gvr.Resource, "error", err)
			}
			continue
		}
		_, err := f.ForResource(gvr).Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if !initial {
					poke(obj)
				}
			},
			UpdateFunc: func(_, obj any) { poke(obj) },
			DeleteFunc: poke,
		})
		if err != nil {
			s.opts.Logger.Warn("cannot watch the fleet", "resource", gvr.Resource, "error", err)
		}
	}
	f.Start(ctx.Done())
	return f
}

// fleetActionData is the confirmation page of a fleet action, and its result.
type fleetActionData struct {
	page
	// Action is suspend, resume or retry; Kind the resource's kind.
	Action, Kind, Namespace, Name string
	Done                          bool
	Refused                       []string
}

// fleetAction is what each action changes: a merge patch of the named
// resource, made with the user's credentials.
func fleetAction(action string) (schema.GroupVersionResource, string, func() []byte, bool) {
	switch action {
	case "suspend", "resume":
		return installationsGVR, "PluginInstallation", func() []byte {
			return fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, action == "suspend")
		}, true
	case "retry":
		return rolloutsGVR, "PluginRollout", func() []byte {
			return fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, AnnotationRetry, time.Now().UTC().Format(time.RFC3339Nano))
		}, true
	}
	return schema.GroupVersionResource{}, "", nil, false
}

// fleetConfirm asks before an action: it names it and what it does; only its
// form posts it.
func (s *Server) fleetConfirm(w http.ResponseWriter, r *http.Request) {
	act := r.PathValue("action")
	_, kind, _, ok := fleetAction(act)
	d := fleetActionData{page: s.page(r, "Fleet: "+act, "fleet"), Action: act, Kind: kind, Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	if !ok {
		d.Refused = []string{fmt.Sprintf("unknown action %q: expected suspend, resume or retry", act)}
		s.render(w, http.StatusNotFound, "fleet-action.html", d)
		return
	}
	s.render(w, http.StatusOK, "fleet-action.html", d)
}

// fleetDo runs an action with the dashboard's credentials, which are the
// user's: the API server refuses what they may not do, and the page says so.
func (s *Server) fleetDo(w http.ResponseWriter, r *http.Request) {
	act := r.PathValue("action")
	gvr, kind, patch, ok := fleetAction(act)
	d := fleetActionData{page: s.page(r, "Fleet: "+act, "fleet"), Action: act, Kind: kind, Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	if !ok {
		d.Refused = []string{fmt.Sprintf("unknown action %q: expected suspend, resume or retry", act)}
		s.render(w, http.StatusNotFound, "fleet-action.html", d)
		return
	}
	if err := s.checkForm(r); err != nil {
		d.Refused = []string{err.Error()}
		s.render(w, http.StatusForbidden, "fleet-action.html", d)
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		d.Refused = []string{"the action needs the confirmation"}
		s.render(w, http.StatusBadRequest, "fleet-action.html", d)
		return
	}
	_, err := s.dyn.Resource(gvr).Namespace(d.Namespace).Patch(r.Context(), d.Name, types.MergePatchType, patch(), metav1.PatchOptions{FieldManager: "kubeplug-dashboard"})
	if err != nil {
		d.Refused = []string{fmt.Sprintf("%s %s/%s: %v", act, d.Namespace, d.Name, err)}
		status := http.StatusInternalServerError
		switch {
		case apierrors.IsForbidden(err):
			status = http.StatusForbidden
		case apierrors.IsNotFound(err):
			status = http.StatusNotFound
		}
		s.render(w, status, "fleet-action.html", d)
		return
	}
	if act == "retry" {
		// The rollout halts on its failed clusters' installations: each is
		// asked to reconcile again too (the controller reconciles an
		// installation whose annotations change).
		if err := s.retryChildren(r.Context(), d.Namespace, d.Name, patch()); err != nil {
			d.Refused = []string{fmt.Sprintf("retry %s/%s: the rollout was asked, but its failed installations not: %v", d.Namespace, d.Name, err)}
			s.render(w, http.StatusForbidden, "fleet-action.html", d)
			return
		}
	}
	d.Done = true
	s.hub.notify()
	s.render(w, http.StatusOK, "fleet-action.html", d)
}

// retryChildren patches the installations rollout made whose phase is not
// Ready (the controller's label kubeplug.dev/rollout names their rollout).
func (s *Server) retryChildren(ctx context.Context, namespace, rollout string, patch []byte) error {
	l, err := s.dyn.Resource(installationsGVR).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: labelRollout + "=" + rollout})
	if err != nil {
		return err
	}
	for _, u := range l.Items {
		var inst ctrlv1.PluginInstallation
		typed(&u, &inst)
		if phaseOf(inst.Status.Conditions) == "Ready" {
			continue
		}
		if _, err := s.dyn.Resource(installationsGVR).Namespace(namespace).Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubeplug-dashboard"}); err != nil {
			return err
		}
	}
	return nil
}

// labelRollout is controller.LabelRollout: the rollout an installation belongs to.
const labelRollout = "kubeplug.dev/rollout"
