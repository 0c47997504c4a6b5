package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/serving"
)

// renewals remembers, per installation, when the next serving CA or
// certificate of its plugins is due (serving.RenewAt, two thirds into its
// lifetime). The installation is applied again then, whatever its interval:
// the apply renews them (serving.Inject) and fills the new CA bundle into the
// APIServices and webhook configurations, so the controller keeps served
// certificates current without anyone running apply. After a controller
// restart the first reconcile reads the Secrets again.
type renewals struct {
	mu sync.Mutex
	at map[string]time.Time // installation -> next due; zero: none
}

func (r *renewals) get(owner string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[owner]
	return t, ok
}

func (r *renewals) set(owner string, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = map[string]time.Time{}
	}
	r.at[owner] = t
}

// nextRenewal is the earliest serving.RenewAt of the serving Secrets among
// recs' objects, zero when they hold none. A Secret that is gone is drift,
// which the installation's interval corrects.
func nextRenewal(ctx context.Context, tg *target, recs []*deploy.Record) (time.Time, error) {
	var due time.Time
	now := time.Now()
	for _, rec := range recs {
		for _, ref := range rec.Objects {
			if ref.Kind != "Secret" || ref.Group != "" {
				continue
			}
			ri, err := tg.client.ResourceFor(ref)
			if err != nil {
				return time.Time{}, err
			}
			s, err := ri.Get(ctx, ref.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return time.Time{}, fmt.Errorf("read Secret %s/%s of plugin %s for its certificates' renewal: %w", ref.Namespace, ref.Name, rec.Plugin, err)
			}
			if at, ok := serving.RenewAt(s, now); ok && (due.IsZero() || at.Before(due)) {
				due = at
			}
		}
	}
	return due, nil
}

// renewalDue is when the installation's serving certificates are next due:
// remembered from its last apply, or read from its plugins' Secrets.
func (r *installationReconciler) renewalDue(ctx context.Context, tg *target, owner string) (time.Time, error) {
	if t, ok := r.renew.get(owner); ok {
		return t, nil
	}
	d, err := deploy.New(tg.config, deploy.Options{Owner: owner, Client: tg.client, Heads: tg.heads})
	if err != nil {
		return time.Time{}, err
	}
	recs, err := d.Owned(ctx)
	if err != nil {
		return time.Time{}, err
	}
	t, err := nextRenewal(ctx, tg, recs)
	if err == nil {
		r.renew.set(owner, t)
	}
	return t, err
}

// untilRenewal shortens a requeue to when the serving certificates are due
// (at least a second away).
func untilRenewal(after time.Duration, due time.Time) time.Duration {
	if due.IsZero() {
		return after
	}
	return min(after, max(time.Until(due), time.Second))
}
