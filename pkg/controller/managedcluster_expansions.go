package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/action"
)

// clusterExpansions is what a ManagedCluster's up merges of its
// spec.expansions: read by inputs (the keys, the site; their stamp is in the
// digest), pulled and verified before up (pullExpansions).
type clusterExpansions struct {
	passing *passing
	unpack  unpacks
	// use and applied are pull's: the up's action.ExpansionUse and what its
	// status says of them.
	use     action.ExpansionUse
	applied []ctrlv1.AppliedExpansion
}

// upInputs are the inputs of an up: inputs, with the expansions.
func (r *clusterReconciler) upInputs(ctx context.Context, obj *ctrlv1.ManagedCluster) (*clusterInputs, error) {
	in, err := r.inputs(ctx, obj)
	if err != nil {
		return nil, err
	}
	return in, r.expansionInputs(ctx, obj, in)
}

// expansionInputs reads a ManagedCluster's spec.expansions, its
// suspendExpansions and expansionSite into in, and adds what identifies them
// to its digest (which stays as it was without expansions: an upgraded
// controller does not run up again on every cluster). Down does not read
// them: it merges none, and a keys ConfigMap deleted first must not keep a
// cluster from going. The site's allowlist becomes the cluster file's
// spec.expansions.allow, so that up checks what it checks for `kubeplug up`;
// a file that sets its own allowlist as well, or an allowFile (a file of the
// controller's), is refused naming the field.
func (r *clusterReconciler) expansionInputs(ctx context.Context, obj *ctrlv1.ManagedCluster, in *clusterInputs) error {
	spec, file := &obj.Spec, in.cluster.File
	where := fmt.Sprintf("ManagedCluster %s/%s", obj.Namespace, obj.Name)
	sp := sitePolicy{site: spec.ExpansionSite, where: where, fileWhere: file}
	if x := in.cluster.Spec.Spec.Expansions; x != nil {
		if x.AllowFile != "" {
			return fmt.Errorf("%s: spec.expansions.allowFile: a file of the controller's; give the allowlist in the file's spec.expansions.allow or the %s's spec.expansionSite.allow", file, where)
		}
		if x.Allow != nil && spec.ExpansionSite != nil && spec.ExpansionSite.Allow != nil {
			return fmt.Errorf("%s: spec.expansions.allow: the %s sets spec.expansionSite.allow too; keep one allowlist", file, where)
		}
		sp.fileAllow = x.Allow
	}
	if a := spec.ExpansionSite; a != nil && a.Allow != nil {
		in.cluster.Spec.Spec.Expansions = &v1alpha1.ClusterExpansions{Allow: &v1alpha1.ExpansionAllow{
			SkipSteps: a.Allow.SkipSteps, SkipConditions: a.Allow.SkipConditions, DelegateConditions: a.Allow.DelegateConditions,
		}}
	}
	suspendedBy := ""
	if spec.SuspendExpansions {
		suspendedBy = "spec.suspendExpansions of the " + where
	}
	p, u, err := r.c.passingRefs(ctx, r.client, obj.Namespace, spec.Expansions, suspendedBy, sp)
	if err != nil {
		var se *specError
		if errors.As(err, &se) {
			return fmt.Errorf("%s: %s", where, se.msg)
		}
		return err
	}
	in.expansions = &clusterExpansions{passing: p, unpack: u}
	if p.stamp != "" {
		sum := sha256.Sum256([]byte(in.digest + "\x00expansions=" + p.stamp))
		in.digest = "sha256:" + hex.EncodeToString(sum[:])
	}
	return nil
}

// pullExpansions writes the expansions' keys, pulls and verifies each
// expansion against them and the site's allowlist, and gives the up their
// use.
func (r *clusterReconciler) pullExpansions(ctx context.Context, obj *ctrlv1.ManagedCluster, in *clusterInputs) error {
	x := in.expansions
	if x == nil {
		return nil
	}
	if err := x.unpack.do(); err != nil {
		return fmt.Errorf("unpack the expansions' keys: %w", err)
	}
	use, applied, err := r.c.pull(ctx, x.passing, obj.Name)
	if err != nil {
		return err
	}
	x.use, x.applied = use, applied
	return nil
}

// expansionRefused records expansions that cannot be merged: one refused
// (untrusted signer, beyond the allowlist, a bad file) stalls the
// ManagedCluster with ExpansionRefused, up not run and not retried until its
// spec, keys or Secrets change; any other error (the registry unreachable)
// fails it, retried after ClusterRetry.
func (r *clusterReconciler) expansionRefused(obj *ctrlv1.ManagedCluster, err error) reconcile.Result {
	var se *specError
	if !errors.As(err, &se) {
		r.clusterCondition(obj, "Failed", ReasonUpFailed, "expansions: "+err.Error())
		return reconcile.Result{RequeueAfter: r.c.opts.ClusterRetry}
	}
	msg := fmt.Sprintf("ManagedCluster %s/%s: %s (up not run)", obj.Namespace, obj.Name, se.msg)
	r.clusterCondition(obj, "Failed", ReasonExpansionRefused, msg)
	meta.SetStatusCondition(&obj.Status.Conditions, newCondition("Stalled", metav1.ConditionTrue, obj.Generation, ReasonExpansionRefused, msg))
	return reconcile.Result{}
}

// expansionsUse is the up's use of the expansions (none when there are none).
func (in *clusterInputs) expansionsUse() action.ExpansionUse {
	if in.expansions == nil {
		return action.ExpansionUse{}
	}
	return in.expansions.use
}

// upExpansions records in obj's status, after a successful up, the
// expansions it merged and returns what the Ready message says of them.
func upExpansions(obj *ctrlv1.ManagedCluster, in *clusterInputs) string {
	if in.expansions == nil {
		obj.Status.Expansions = nil
		return ""
	}
	obj.Status.Expansions = in.expansions.applied
	return passedMessage(in.expansions.passing, in.expansions.applied)
}
