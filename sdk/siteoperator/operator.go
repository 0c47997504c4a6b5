package siteoperator

import (
	"context"

	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GVK is the kind of the object conditions are set on.
var GVK = schema.GroupVersionKind{Group: "expansion.kubeplug.dev", Version: "v1alpha1", Kind: "SiteCondition"}

// Probe says whether a condition holds now, with a message for its status. An
// error is reported as the condition Unknown.
type Probe func(ctx context.Context) (ok bool, message string, err error)

// Operator sets the conditions of one SiteCondition from its probes.
type Operator struct {
	// Name is the operator's name: the SiteCondition it owns.
	Name string
	// Client talks to the cluster (controller-runtime's).
	Client client.Client
	// Probes by condition type.
	Probes map[string]Probe
	// Interval between rounds; default 5s.
	Interval time.Duration
	// Logger; none when nil.
	Logger *slog.Logger
}

// Run probes and sets the conditions every Interval until ctx is done; a
// SiteCondition that does not exist yet (the expansion's plugin is not
// deployed yet) is waited for. It returns nil when ctx is cancelled.
func (o *Operator) Run(ctx context.Context) error {
	interval := o.Interval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := o.Reconcile(ctx); err != nil && ctx.Err() == nil {
			o.log().Warn("site operator round failed", "operator", o.Name, "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Reconcile runs every probe once and writes the conditions. A missing
// SiteCondition is not an error: there is nothing to prove yet.
func (o *Operator) Reconcile(ctx context.Context) error {
	for cond, probe := range o.Probes {
		ok, msg, err := probe(ctx)
		status, reason := metav1.ConditionFalse, "ProbeFailed"
		switch {
		case err != nil:
			status, reason, msg = metav1.ConditionUnknown, "ProbeError", err.Error()
		case ok:
			status, reason = metav1.ConditionTrue, "ProbePassed"
		}
		if err := SetCondition(ctx, o.Client, o.Name, cond, status, reason, msg); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				return nil
			}
			return err
		}
	}
	return nil
}

func (o *Operator) log() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// SetCondition sets one condition on the SiteCondition named operator, with
// observedGeneration, keeping the others; the last transition time changes only
// with the status.
func SetCondition(ctx context.Context, c client.Client, operator, condType string, status metav1.ConditionStatus, reason, message string) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK)
	if err := c.Get(ctx, client.ObjectKey{Name: operator}, u); err != nil {
		return err
	}
	var conds []metav1.Condition
	if raw, ok, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); ok {
		for _, r := range raw {
			m, ok := r.(map[string]any)
			if !ok {
				continue
			}
			var cd metav1.Condition
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cd); err == nil {
				conds = append(conds, cd)
			}
		}
	}
	meta.SetStatusCondition(&conds, metav1.Condition{Type: condType, Status: status, Reason: reason, Message: message, ObservedGeneration: u.GetGeneration()})
	out := make([]any, 0, len(conds))
	for _, cd := range conds {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cd)
		if err != nil {
			return err
		}
		out = append(out, m)
	}
	if err := unstructured.SetNestedSlice(u.Object, out, "status", "conditions"); err != nil {
		return err
	}
	if err := unstructured.SetNestedField(u.Object, u.GetGeneration(), "status", "observedGeneration"); err != nil {
		return err
	}
	if err := c.Status().Update(ctx, u); err != nil {
		return fmt.Errorf("set condition %s on %s %s: %w", condType, GVK.Kind, operator, err)
	}
	return nil
}
