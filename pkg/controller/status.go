package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

// fromField decodes obj's top-level field (spec, status) into out.
func fromField(obj *unstructured.Unstructured, field string, out any) error {
	v, ok := obj.Object[field]
	if !ok {
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

// setCondition sets a condition, keeping its lastTransitionTime unless its
// status changes.
func setCondition(conds []v1alpha1.Condition, gen int64, typ, status, reason, msg string) []v1alpha1.Condition {
	if len(msg) > 32000 {
		msg = msg[:32000] + "…"
	}
	for i, c := range conds {
		if c.Type != typ {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = now()
		}
		c.Status, c.Reason, c.Message, c.ObservedGeneration = status, reason, msg, gen
		conds[i] = c
		return conds
	}
	return append(conds, v1alpha1.Condition{Type: typ, Status: status, ObservedGeneration: gen, LastTransitionTime: now(), Reason: reason, Message: msg})
}

// removeCondition drops a condition (kstatus reads an absent Reconciling or
// Stalled as False).
func removeCondition(conds []v1alpha1.Condition, typ string) []v1alpha1.Condition {
	out := conds[:0]
	for _, c := range conds {
		if c.Type != typ {
			out = append(out, c)
		}
	}
	return out
}

// condition returns a condition, nil when absent.
func condition(conds []v1alpha1.Condition, typ string) *v1alpha1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

func sameStatus(a, b any) bool { return reflect.DeepEqual(a, b) }

// writeStatus replaces obj's status through the status subresource.
func writeStatus(ctx context.Context, c client.Client, obj *unstructured.Unstructured, status any) error {
	raw, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	return c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, raw))
}
