package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StatusPatcher is statusPatcher for the external tests.
type StatusPatcher struct{ p *statusPatcher }

func NewStatusPatcher(c client.Client, obj client.Object) StatusPatcher {
	return StatusPatcher{newStatusPatcher(c, obj)}
}

func (s StatusPatcher) Patch(ctx context.Context, obj client.Object) error {
	return s.p.patch(ctx, obj)
}

func (s StatusPatcher) Finish(ctx context.Context, obj client.Object, err error) error {
	return s.p.finish(ctx, obj, err)
}

// ErrGone is errGone.
var ErrGone = errGone

// SetReady is ready.
func SetReady(conds *[]metav1.Condition, gen int64, reason, msg string) {
	ready(conds, gen, reason, msg)
}
