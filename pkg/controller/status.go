package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// statusPatcher writes what a reconcile changed of an object's status, through
// the status subresource, as fluxcd/pkg/runtime/patch's SerialPatcher does:
// a reconciler takes one right after it reads the object and defers finish;
// a reconcile that must show progress before it ends (an apply that takes
// minutes) calls patch on the way.
//
// The patch is a JSON merge patch from the status as last read or written to
// the status now: only what changed is sent (a field set back to empty is
// removed), nothing when nothing changed, and never the spec or the metadata,
// so a finalizer written meanwhile is no conflict. It carries no
// resourceVersion: the controller is the status's only writer, and its last
// word wins. A conflict the API server reports all the same is retried.
type statusPatcher struct {
	client client.Client
	// before is the object as last read or written.
	before client.Object
}

func newStatusPatcher(c client.Client, obj client.Object) *statusPatcher {
	return &statusPatcher{client: c, before: obj.DeepCopyObject().(client.Object)}
}

// patch writes obj's status if it changed since the last read or write. obj
// itself is left as it is (the response is decoded into a copy), so the
// reconcile goes on with the spec it started with.
func (p *statusPatcher) patch(ctx context.Context, obj client.Object) error {
	raw, err := statusPatch(p.before, obj)
	if err != nil || raw == nil {
		return err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return p.client.Status().Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, raw))
	})
	if err != nil {
		return fmt.Errorf("write the status of %s %s/%s: %w", kindOf(obj), obj.GetNamespace(), obj.GetName(), err)
	}
	p.before = obj.DeepCopyObject().(client.Object)
	return nil
}

// resend makes the next patch carry the fields mark changes in the status
// as last read or written, whether or not they changed: for a field whose
// last write may not have reached the cache the object was read from.
func (p *statusPatcher) resend(mark func(before client.Object)) { mark(p.before) }

// finish ends a reconcile that returns err: it writes the status, unless the
// object is gone (errGone), and returns err, or the write's error when err is
// nil.
func (p *statusPatcher) finish(ctx context.Context, obj client.Object, err error) error {
	if errors.Is(err, errGone) {
		return nil
	}
	if perr := p.patch(ctx, obj); perr != nil && err == nil {
		return perr
	}
	return err
}

// errGone ends a reconcile whose object was deleted: finish writes no status.
var errGone = errors.New("gone")

// statusPatch is the merge patch from before's status to after's; nil when
// they are the same.
func statusPatch(before, after client.Object) ([]byte, error) {
	from, err := statusJSON(before)
	if err != nil {
		return nil, err
	}
	to, err := statusJSON(after)
	if err != nil {
		return nil, err
	}
	raw, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil || string(raw) == "{}" {
		return nil, err
	}
	return raw, nil
}

// statusJSON is {"status": …} of obj, whatever its kind.
func statusJSON(obj client.Object) ([]byte, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"status": u["status"]})
}

// newCondition is a condition of an object at generation gen; its message is
// cut to what the CRDs' schema takes. meta.SetStatusCondition then keeps its
// lastTransitionTime unless its status changes.
func newCondition(typ string, status metav1.ConditionStatus, gen int64, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, ObservedGeneration: gen, Reason: reason, Message: truncate(msg, 32000)}
}
