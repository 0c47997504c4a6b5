package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/provider"
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

// MachineTracker is machineTracker for the external tests.
type MachineTracker struct{ t *machineTracker }

func NewMachineTracker(cl *config.Cluster, was []ctrlv1.MachineStatus, down bool) MachineTracker {
	return MachineTracker{newMachineTracker(cl, was, down)}
}

func (m MachineTracker) Event(e provider.Event)       { m.t.event(e) }
func (m MachineTracker) Stopped(err error)            { m.t.stopped(err) }
func (m MachineTracker) Finished(cl *config.Cluster)  { m.t.finished(cl) }
func (m MachineTracker) List() []ctrlv1.MachineStatus { l, _ := m.t.list(); return l }
