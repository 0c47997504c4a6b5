package check

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/expr"
)

// resource is where the API server serves a kind.
type resource struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

// resolve finds the resource of o's kind: in o.APIVersion when set, else in the
// preferred version of the core group or of the one API group that has the kind. It asks discovery on
// every call: a check is retried until its kind is served (a CRD applied in the
// same run may not be yet).
func (r *Runner) resolve(o v1alpha1.ObjectRef) (resource, error) {
	if o.APIVersion != "" {
		return r.resolveIn(o)
	}
	// Discovery may fail for some groups (an aggregated API that is down) and still
	// answer for the others.
	lists, err := r.disc.ServerPreferredResources()
	var found []resource
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, ar := range l.APIResources {
			if ar.Kind == o.Kind && !strings.Contains(ar.Name, "/") {
				found = append(found, resource{gvr: gv.WithResource(ar.Name), namespaced: ar.Namespaced})
			}
		}
	}
	// The core group wins, as it does for kubectl (Event is also events.k8s.io's).
	if i := slices.IndexFunc(found, func(r resource) bool { return r.gvr.Group == "" }); i >= 0 {
		return found[i], nil
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		var groups []string
		for _, f := range found {
			groups = append(groups, f.gvr.GroupVersion().String())
		}
		slices.Sort(groups)
		return resource{}, fmt.Errorf("kind %s is served in several API groups (%s); set apiVersion", o.Kind, strings.Join(groups, ", "))
	case err != nil:
		return resource{}, fmt.Errorf("the API server serves no kind %s (discovery was incomplete: %w)", o.Kind, err)
	}
	return resource{}, fmt.Errorf("the API server serves no kind %s", o.Kind)
}

// resolveIn finds the resource of o's kind in o.APIVersion.
func (r *Runner) resolveIn(o v1alpha1.ObjectRef) (resource, error) {
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil {
		return resource{}, fmt.Errorf("apiVersion %q: %w", o.APIVersion, err)
	}
	list, err := r.disc.ServerResourcesForGroupVersion(o.APIVersion)
	if err != nil && !apierrors.IsNotFound(err) {
		return resource{}, fmt.Errorf("discover %s: %w", o.APIVersion, err)
	}
	if list != nil {
		for _, ar := range list.APIResources {
			if ar.Kind == o.Kind && !strings.Contains(ar.Name, "/") {
				return resource{gvr: gv.WithResource(ar.Name), namespaced: ar.Namespaced}, nil
			}
		}
	}
	return resource{}, fmt.Errorf("the API server serves no kind %s in %s", o.Kind, o.APIVersion)
}

// client returns the client for o's resource, in o's namespace ("default" for a
// namespaced kind without one, as kubectl does) or across namespaces when o names
// no object and no namespace.
func (r *Runner) client(res resource, o v1alpha1.ObjectRef) dynamic.ResourceInterface {
	if !res.namespaced {
		return r.dyn.Resource(res.gvr)
	}
	ns := o.Namespace
	if ns == "" && o.Name != "" {
		ns = metav1.NamespaceDefault
	}
	return r.dyn.Resource(res.gvr).Namespace(ns)
}

// get reads the object o names; its error is a *failing worded for state.
func (r *Runner) get(ctx context.Context, o v1alpha1.ObjectRef, state string) (*unstructured.Unstructured, error) {
	res, err := r.resolve(o)
	if err != nil {
		return nil, &failing{state: state, detail: err.Error()}
	}
	if res.namespaced && o.Namespace == "" {
		o.Namespace = metav1.NamespaceDefault // for messages; client does the same
	}
	got, err := r.client(res, o).Get(ctx, o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, &failing{state: state, detail: ref(o) + " does not exist"}
	}
	if err != nil {
		return nil, &failing{state: state, detail: "read " + ref(o) + ": " + err.Error(), transient: true}
	}
	return got, nil
}

// wait passes when the object exists and kstatus says it is Current.
func (r *Runner) wait(w *v1alpha1.ObjectWait) attempt {
	o := w.ObjectRef
	return func(ctx context.Context) (string, error) {
		if o.Name == "" {
			return "", terminal{errors.New("the wait names no object")}
		}
		got, err := r.get(ctx, o, "is not ready")
		var f *failing
		if errors.As(err, &f) && strings.HasSuffix(f.detail, " does not exist") {
			// The subject already names the object.
			return "", &failing{state: "does not exist"}
		}
		if err != nil {
			return "", err
		}
		if w.Condition != "" {
			return conditionTrue(got, w.Condition)
		}
		st, err := status.Compute(got)
		if err != nil {
			return "", &failing{state: "is not ready", detail: "its status cannot be read: " + err.Error()}
		}
		if st.Status != status.CurrentStatus {
			detail := string(st.Status)
			if st.Message != "" {
				detail += ": " + st.Message
			}
			return "", &failing{state: "is not ready", detail: detail}
		}
		return ref(o) + " is Current", nil
	}
}

// expression passes when the expression is true of the object, or of the list of
// objects when the check names none.
func (r *Runner) expression(c *v1alpha1.ExpressionCheck) (attempt, error) {
	named := c.Name != ""
	prg, err := compile(c.Expression, named)
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	o := c.ObjectRef
	return func(ctx context.Context) (string, error) {
		var (
			vars   map[string]any
			detail string
		)
		if named {
			got, err := r.get(ctx, o, "cannot be evaluated")
			if err != nil {
				return "", err
			}
			vars, detail = map[string]any{"object": got.Object}, ref(o)
		} else {
			res, err := r.resolve(o)
			if err != nil {
				return "", &failing{state: "cannot be evaluated", detail: err.Error()}
			}
			list, err := r.client(res, o).List(ctx, metav1.ListOptions{})
			if err != nil {
				return "", &failing{state: "cannot be evaluated", detail: "list " + ref(o) + ": " + err.Error(), transient: true}
			}
			objs := make([]any, len(list.Items))
			for i := range list.Items {
				objs[i] = list.Items[i].Object
			}
			vars, detail = map[string]any{"objects": objs}, fmt.Sprintf("%s (%d)", ref(o), len(objs))
		}
		b, err := prg.Eval(ctx, vars)
		if nb := (*expr.NotBoolError)(nil); errors.As(err, &nb) {
			return "", &failing{state: "does not yield a bool", detail: fmt.Sprintf("%s: it yields %s", detail, nb.Type)}
		}
		if err != nil {
			return "", &failing{state: "cannot be evaluated", detail: detail + ": " + err.Error()}
		}
		if !b {
			return "", &failing{state: "is false", detail: detail}
		}
		return "true of " + detail, nil
	}, nil
}

// conditionTrue passes when got's condition typ is True for its current
// generation; else it says what the condition (or its absence) is.
func conditionTrue(got *unstructured.Unstructured, typ string) (string, error) {
	conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	gen := got.GetGeneration()
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != typ {
			continue
		}
		st, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		if st != "True" {
			detail := typ + "=" + st
			if reason != "" || msg != "" {
				detail += " (" + strings.TrimSuffix(reason+": "+msg, ": ") + ")"
			}
			return "", &failing{state: "is not ready", detail: detail}
		}
		observed, ok, _ := unstructured.NestedInt64(m, "observedGeneration")
		if !ok {
			observed, ok, _ = unstructured.NestedInt64(got.Object, "status", "observedGeneration")
		}
		if ok && gen != 0 && observed < gen {
			return "", &failing{state: "is not ready", detail: fmt.Sprintf("%s=True is for generation %d, the object is at %d", typ, observed, gen)}
		}
		return fmt.Sprintf("%s has %s=True", ref(got2ref(got)), typ), nil
	}
	return "", &failing{state: "is not ready", detail: "it has no " + typ + " condition yet (is its operator running?)"}
}

func got2ref(u *unstructured.Unstructured) v1alpha1.ObjectRef {
	return v1alpha1.ObjectRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}
