package action

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/lease"
)

// Lease says how an action that changes a cluster's plugins (apply, uninstall,
// rollback) takes the cluster's operation lease, so that two runs never change
// the plugins at once. Dry runs and read-only actions take none.
type Lease struct {
	// Wait is how long to wait for a lease another run holds; zero fails at once
	// with an error naming the holder.
	Wait time.Duration
	// Duration is how long the lease lasts unless renewed; a run that dies holding
	// it blocks the next one for at most this long. Default
	// lease.DefaultDuration.
	Duration time.Duration
	// External says the caller holds the cluster's operation lease itself for
	// the run (kubeplug's controller holds it while it works on a cluster, and
	// runs several installations' applies under it): the action takes none.
	External bool
}

// lock takes the lease for op on the cluster d deploys to: taking it is the
// action's concern, not the deployer's, which only applies. The returned context
// is ctx, cancelled as well when the lease is lost; unlock frees the lease
// (logging a failure, after which the lease expires by itself) and must be called
// once the operation ends, however it ends.
func (l Lease) lock(ctx context.Context, d *deploy.Deployer, op string, log *slog.Logger) (context.Context, func(), error) {
	return l.lockNamed(ctx, d, op, "", nil, log)
}

// lockNamed is lock for an operation that applies the cluster file named
// cluster: the lease keeps the name, and other is asked when it names another
// cluster (lease.Options.Cluster, OtherCluster).
func (l Lease) lockNamed(ctx context.Context, d *deploy.Deployer, op, cluster string, other func(string) error, log *slog.Logger) (context.Context, func(), error) {
	if l.External {
		return ctx, func() {}, nil
	}
	// The wait is an event (the CLI shows it); the log has it at debug level
	// only, so that it is not told twice.
	var waited bool
	waiting := func(e *lease.LockedError) {
		waited = true
		log.Debug("waiting for the cluster's operation lease", "holder", e.Holder, "operation", e.Operation,
			"waited", e.Waited.Round(time.Second), "expiresIn", e.ExpiresIn.Round(time.Second), "waitUpTo", l.Wait)
		d.Report(deploy.Event{Type: deploy.LeaseWaiting, Holder: e.Holder, Operation: e.Operation, Expires: time.Now().Add(e.ExpiresIn),
			Message: fmt.Sprintf("waited %s of up to %s", e.Waited.Round(time.Second), l.Wait)})
	}
	opCtx, release, err := lease.Lock(ctx, d.Client(), lease.Options{Operation: op, Duration: l.Duration, Wait: l.Wait, Namespace: d.Namespace(), Waiting: waiting, Cluster: cluster, OtherCluster: other})
	if err != nil {
		return ctx, func() {}, err
	}
	if waited {
		d.Report(deploy.Event{Type: deploy.LeaseTaken, Operation: op, Message: "took the cluster's operation lease"})
	}
	return opCtx, func() {
		if err := release(ctx); err != nil {
			log.Warn("could not release the operation lease; it expires by itself", "error", err)
		}
	}, nil
}
