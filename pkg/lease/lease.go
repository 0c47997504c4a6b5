package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/internal/faultpoint"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
)

// Name is the coordination.k8s.io Lease in the state namespace that every
// operation changing a cluster's plugins holds while it runs.
const Name = "kubeplug-operation"

// Annotations on the Lease saying who holds it.
const (
	AnnotationOperation = "kubeplug.dev/operation"
	AnnotationHolder    = "kubeplug.dev/holder"
	AnnotationSince     = "kubeplug.dev/since"
	// AnnotationCluster names the cluster: the metadata.name of the cluster file
	// last applied to it (Options.Cluster). Unlike the others it stays when the
	// lease is freed.
	AnnotationCluster = "kubeplug.dev/cluster"
)

// DefaultDuration is how long a lease lasts without renewal.
const DefaultDuration = 30 * time.Second

// ErrLocked is returned by Lock when another operation holds the lease; the error
// is a *LockedError saying which.
var ErrLocked = errors.New("another kubeplug operation holds the cluster's lease")

// ErrLeaseLost is the cause of the context Lock returns being cancelled: the lease
// could not be renewed before it expired, or another operation took it over.
var ErrLeaseLost = errors.New("lost the cluster's operation lease")

// LockedError says which operation holds the lease.
type LockedError struct {
	// Operation is the command of the holder (apply, uninstall, rollback).
	Operation string
	// Holder is the holder's host/pid.
	Holder string
	// Since is when the holder took the lease.
	Since time.Time
	// ExpiresIn is how long the lease lasts if its holder stops renewing it.
	ExpiresIn time.Duration
	// Waited is how long Lock waited for it.
	Waited time.Duration
}

func (e *LockedError) Error() string {
	op, holder := e.Operation, e.Holder
	if op == "" {
		op = "an operation"
	}
	if holder == "" {
		holder = "an unknown holder"
	}
	s := fmt.Sprintf("%v: %s by %s", ErrLocked, op, holder)
	if !e.Since.IsZero() {
		s += " since " + e.Since.UTC().Format("15:04:05") + " UTC"
	}
	s += fmt.Sprintf(" (expires in %s)", max(e.ExpiresIn, 0).Round(time.Second))
	if e.Waited >= time.Second {
		s += fmt.Sprintf("; waited %s; wait longer with --lock-timeout or retry", e.Waited.Round(time.Second))
	} else {
		s += "; wait with --lock-timeout or retry"
	}
	return s
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// DefaultNamespace holds the Lease unless Options.Namespace says otherwise: the
// namespace of the release records.
const DefaultNamespace = "kubeplug-system"

// Options configure Lock. The zero value of each field means its default.
type Options struct {
	// Operation names the command taking the lease (apply, uninstall, rollback); it
	// is shown to a run that finds the lease held. Required.
	Operation string
	// Duration is how long the lease lasts without renewal; it is renewed every
	// third of it. A run killed while holding the lease blocks others for at most
	// this long. Default DefaultDuration; at least one second.
	Duration time.Duration
	// Wait is how long to wait for a lease another operation holds before failing
	// with a *LockedError. Zero fails at once.
	Wait time.Duration
	// Identity identifies this holder. Default: host/pid/random suffix.
	Identity string
	// Namespace holds the Lease. Default DefaultNamespace.
	Namespace string
	// DryRun takes no lease: Lock returns ctx and a release that does nothing, so a
	// caller passes its dry-run flag through instead of branching.
	DryRun bool
	// Cluster, when set, is the name of the cluster file the operation applies
	// (its metadata.name): the Lease keeps it (AnnotationCluster), so that a later
	// run can tell a file of another name from the one last applied. Empty keeps
	// the name the Lease has.
	Cluster string
	// OtherCluster, when set, is called once when the Lease names another cluster
	// than Cluster, before the lease is taken: an error it returns is Lock's (as
	// it is, not wrapped), and nothing is written. When it returns nil, or is
	// nil, the cluster takes the name Cluster.
	OtherCluster func(previous string) error
	// Waiting, when set, is told when Lock starts waiting for a lease another run
	// holds, and every 10 seconds while it waits, with who holds it and when it
	// expires: a run should not wait in silence.
	Waiting func(*LockedError)
}

// Lock takes the cluster's operation lease before an operation changes plugins,
// waiting up to opts.Wait for another holder to release it or for its lease to
// expire (a holder that died stops renewing, so its lease expires). It renews the
// lease until release is called. The returned context is ctx, cancelled with cause
// ErrLeaseLost when the lease is lost: the operation should stop, since another
// may have started. release stops the renewal and frees the lease for the next
// run; it works even when ctx is done, and returns an error only when the lease
// could not be freed (it then expires by itself). A dry run takes no lease.
//
// Two runs never both hold the lease: every take-over and renewal is an update
// conditioned on the resourceVersion read.
func Lock(ctx context.Context, c *kube.Client, opts Options) (context.Context, func(context.Context) error, error) {
	if opts.DryRun {
		return ctx, func(context.Context) error { return nil }, nil
	}
	if opts.Duration <= 0 {
		opts.Duration = DefaultDuration
	}
	opts.Duration = max(opts.Duration.Round(time.Second), time.Second)
	if opts.Identity == "" {
		opts.Identity = newIdentity()
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	l, err := newLeaser(c, opts)
	if err != nil {
		return nil, nil, err
	}
	if err := l.acquire(ctx); err != nil {
		return nil, nil, err
	}
	faultpoint.Hit("lease:taken")
	octx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := l.renew(octx, stop); err != nil {
			c.Logger.Error("lost the operation lease", "lease", opts.Namespace+"/"+Name, "error", err)
			cancel(fmt.Errorf("%w: %w", ErrLeaseLost, err))
		}
	}()
	var once sync.Once
	var relErr error
	release := func(ctx context.Context) error {
		once.Do(func() {
			close(stop)
			<-done
			cancel(nil)
			// Free the lease even when the operation was cancelled.
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer rcancel()
			relErr = l.release(rctx)
		})
		return relErr
	}
	return octx, release, nil
}

func newIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b))
}

// holderName is the host/pid part of an identity, for messages.
func holderName(l *coordinationv1.Lease) string {
	if h := l.Annotations[AnnotationHolder]; h != "" {
		return h
	}
	if l.Spec.HolderIdentity != nil {
		return *l.Spec.HolderIdentity
	}
	return ""
}

// leaser holds the state of one Lock.
type leaser struct {
	c    *kube.Client
	opts Options
	// client reads and writes the Lease; its transport notes the API server's
	// clock from every response's Date header.
	client kubernetes.Interface
	clock  *serverClock
	// lease is the last version of the Lease this holder wrote.
	lease *coordinationv1.Lease
	// seen is the Lease version another holder's record had when first observed,
	// and when (by the local monotonic clock): a record unchanged for longer than
	// its duration has expired whatever the clocks say.
	seenVersion string
	seenAt      time.Time
	// named is the other cluster name OtherCluster accepted.
	named string
}

func newLeaser(c *kube.Client, opts Options) (*leaser, error) {
	clock := &serverClock{}
	cfg := rest.CopyConfig(c.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &clockTransport{next: rt, clock: clock} })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create a client for the operation lease: %w", err)
	}
	return &leaser{c: c, opts: opts, client: cs, clock: clock}, nil
}

func (l *leaser) leases() interface {
	Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(context.Context, *coordinationv1.Lease, metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error)
} {
	return l.client.CoordinationV1().Leases(l.opts.Namespace)
}

// acquire takes the lease: creates it, takes it over when free or expired, or
// waits for it up to opts.Wait.
//
// Branches: the lease's acquire loop, one case per state the lease is found in
// (missing, ours, held, expired) and per outcome of the write, as client-go's
// leader election writes it.
func (l *leaser) acquire(ctx context.Context) error {
	start := time.Now()
	var told time.Duration // when Waiting is next told
	for {
		var cur *coordinationv1.Lease
		err := l.c.Retry(ctx, func(ctx context.Context) error {
			var err error
			cur, err = l.leases().Get(ctx, Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				cur = nil
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("read the operation lease %s/%s: %w", l.opts.Namespace, Name, err)
		}
		if cur != nil {
			// The lease is there, so is its namespace: the records written
			// next need not make sure of it.
			l.c.NamespaceExists(l.opts.Namespace)
		}
		var expiresIn time.Duration
		ours := cur != nil && cur.Spec.HolderIdentity != nil && *cur.Spec.HolderIdentity == l.opts.Identity
		if cur != nil && !ours {
			expiresIn = l.expiresIn(cur)
		}
		if cur == nil || ours || expiresIn <= 0 {
			if err := l.checkCluster(cur); err != nil {
				return err
			}
		}
		switch {
		case cur == nil:
			// The first lease of the cluster: its namespace may not exist yet.
			if err = l.c.EnsureNamespace(ctx, l.opts.Namespace); err == nil {
				err = l.write(ctx, nil)
			}
		case ours:
			// A write whose answer was lost, retried.
			err = l.write(ctx, cur)
		case expiresIn <= 0:
			if h := holderName(cur); h != "" && cur.Spec.HolderIdentity != nil && *cur.Spec.HolderIdentity != "" {
				l.c.Logger.Info("taking over an expired operation lease", "holder", h, "operation", cur.Annotations[AnnotationOperation])
			}
			err = l.write(ctx, cur)
		default:
			err = l.lockedError(cur, expiresIn, time.Since(start))
		}
		switch {
		case err == nil:
			return nil
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
			continue // another run wrote it first; look again
		case !errors.Is(err, ErrLocked):
			return fmt.Errorf("take the operation lease %s/%s: %w", l.opts.Namespace, Name, err)
		}
		waited := time.Since(start)
		if waited >= l.opts.Wait {
			return err
		}
		if le := (*LockedError)(nil); l.opts.Waiting != nil && errors.As(err, &le) && waited >= told {
			l.opts.Waiting(le)
			told = waited.Truncate(10*time.Second) + 10*time.Second
		}
		// Poll: a release is seen within a second, an expiry when it is due.
		pause := min(time.Second, l.opts.Wait-waited, max(expiresIn, 100*time.Millisecond))
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the operation lease: %w", context.Cause(ctx))
		case <-time.After(pause):
		}
	}
}

// checkCluster asks OtherCluster whether the lease may be taken when cur names
// another cluster than opts.Cluster; once per name, since a conflict reads the
// Lease again.
func (l *leaser) checkCluster(cur *coordinationv1.Lease) error {
	if cur == nil || l.opts.Cluster == "" || l.opts.OtherCluster == nil {
		return nil
	}
	prev := cur.Annotations[AnnotationCluster]
	if prev == "" || prev == l.opts.Cluster || prev == l.named {
		return nil
	}
	if err := l.opts.OtherCluster(prev); err != nil {
		return err
	}
	l.named = prev
	return nil
}

func (l *leaser) lockedError(cur *coordinationv1.Lease, expiresIn, waited time.Duration) error {
	e := &LockedError{Operation: cur.Annotations[AnnotationOperation], Holder: holderName(cur), ExpiresIn: expiresIn, Waited: waited}
	if cur.Spec.AcquireTime != nil {
		e.Since = cur.Spec.AcquireTime.Time
	}
	return e
}

// expiresIn is how long cur's holder keeps the lease without renewing it; zero or
// less when the lease is free or expired. A lease is expired when its renewTime
// plus its duration is past by the API server's clock (the holder writes its
// times by the server's clock too, so hosts' clocks need not agree), or when this
// run has watched the same record for longer than its duration — which holds
// whatever any clock says.
func (l *leaser) expiresIn(cur *coordinationv1.Lease) time.Duration {
	if cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity == "" {
		return 0
	}
	dur := DefaultDuration
	if cur.Spec.LeaseDurationSeconds != nil {
		dur = time.Duration(*cur.Spec.LeaseDurationSeconds) * time.Second
	}
	if cur.ResourceVersion != l.seenVersion {
		l.seenVersion, l.seenAt = cur.ResourceVersion, time.Now()
	}
	byObservation := dur - time.Since(l.seenAt)
	renewed := cur.Spec.RenewTime
	if renewed == nil {
		renewed = cur.Spec.AcquireTime
	}
	if renewed == nil {
		return byObservation
	}
	// The Date header has a resolution of a second: a second of slack keeps a lease
	// that is being renewed from being taken over early.
	byClock := renewed.Add(dur + time.Second).Sub(l.clock.now())
	return min(byClock, byObservation)
}

// write takes the lease for this holder: creates it when cur is nil, else updates
// cur (conditioned on its resourceVersion).
func (l *leaser) write(ctx context.Context, cur *coordinationv1.Lease) error {
	now := metav1.NewMicroTime(l.clock.now())
	secs := int32(l.opts.Duration / time.Second)
	id := l.opts.Identity
	host := id
	if i := lastSlash(id); i > 0 {
		host = id[:i]
	}
	next := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: l.opts.Namespace}}
	if cur != nil {
		next = cur.DeepCopy()
	}
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	next.Labels[kube.LabelManagedBy] = kube.FieldManager
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[AnnotationOperation] = l.opts.Operation
	next.Annotations[AnnotationHolder] = host
	next.Annotations[AnnotationSince] = now.UTC().Format(time.RFC3339)
	if l.opts.Cluster != "" {
		next.Annotations[AnnotationCluster] = l.opts.Cluster
	}
	next.Spec.HolderIdentity = &id
	next.Spec.LeaseDurationSeconds = &secs
	next.Spec.AcquireTime = &now
	next.Spec.RenewTime = &now
	var transitions int32
	if next.Spec.LeaseTransitions != nil {
		transitions = *next.Spec.LeaseTransitions + 1
	}
	next.Spec.LeaseTransitions = &transitions
	var got *coordinationv1.Lease
	// A conflict or an existing Lease is no transient error: it ends the retries
	// and acquire looks again.
	err := l.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		if cur == nil {
			got, err = l.leases().Create(ctx, next, metav1.CreateOptions{FieldManager: kube.FieldManager})
		} else {
			got, err = l.leases().Update(ctx, next, metav1.UpdateOptions{FieldManager: kube.FieldManager})
		}
		return err
	})
	if err != nil {
		return err
	}
	l.lease = got
	return nil
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}

// renew renews the lease every third of its duration until stop is closed or ctx
// is done. It returns an error when the lease is lost: another holder has it, or
// it could not be renewed before it expired.
func (l *leaser) renew(ctx context.Context, stop <-chan struct{}) error {
	every := l.opts.Duration / 3
	deadline := time.Now().Add(l.opts.Duration)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		err := l.renewOnce(ctx)
		switch {
		case err == nil:
			deadline = time.Now().Add(l.opts.Duration)
		case errors.Is(err, ErrLeaseLost):
			return err
		case time.Now().After(deadline):
			return fmt.Errorf("not renewed for %s: %w", l.opts.Duration, err)
		default:
			l.c.Logger.Debug("renewing the operation lease failed; retrying", "error", err)
		}
	}
}

func (l *leaser) renewOnce(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, l.opts.Duration/3)
	defer cancel()
	next := l.lease.DeepCopy()
	now := metav1.NewMicroTime(l.clock.now())
	next.Spec.RenewTime = &now
	got, err := l.leases().Update(rctx, next, metav1.UpdateOptions{FieldManager: kube.FieldManager})
	if apierrors.IsConflict(err) {
		// Someone wrote the lease: still ours only if the holder is unchanged.
		cur, gerr := l.leases().Get(rctx, Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		if cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != l.opts.Identity {
			return fmt.Errorf("%w: now held by %s", ErrLeaseLost, holderName(cur))
		}
		l.lease = cur
		return err
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: the Lease was deleted", ErrLeaseLost)
	}
	if err != nil {
		return err
	}
	l.lease = got
	return nil
}

// release frees the lease if this holder still has it, keeping the object (its
// leaseTransitions count and the cluster's name) for the next run.
func (l *leaser) release(ctx context.Context) error {
	// The version this holder last wrote, freed at once: the write is
	// conditioned on it, so a lease written since (taken over) is not touched,
	// and only then is it read again. One request, where a read first made two.
	if l.lease != nil {
		err := l.free(ctx, l.lease.DeepCopy())
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return fmt.Errorf("release the operation lease: %w", err)
		}
	}
	for range 5 {
		var cur *coordinationv1.Lease
		err := l.c.Retry(ctx, func(ctx context.Context) error {
			var err error
			cur, err = l.leases().Get(ctx, Name, metav1.GetOptions{})
			return err
		})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("release the operation lease: %w", err)
		}
		if cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != l.opts.Identity {
			return nil // taken over: not ours to free
		}
		err = l.free(ctx, cur)
		if !apierrors.IsConflict(err) {
			if err != nil {
				return fmt.Errorf("release the operation lease: %w", err)
			}
			return nil
		}
		// Renewed between the read and the write: look again.
	}
	return fmt.Errorf("release the operation lease: it kept changing")
}

// free writes cur, a version of the Lease this holder holds, with no holder,
// conditioned on cur's resourceVersion.
func (l *leaser) free(ctx context.Context, cur *coordinationv1.Lease) error {
	cur.Spec.HolderIdentity = nil
	cur.Spec.AcquireTime = nil
	cur.Spec.RenewTime = nil
	delete(cur.Annotations, AnnotationOperation)
	delete(cur.Annotations, AnnotationHolder)
	delete(cur.Annotations, AnnotationSince)
	return l.c.Retry(ctx, func(ctx context.Context) error {
		_, err := l.leases().Update(ctx, cur, metav1.UpdateOptions{FieldManager: kube.FieldManager})
		return err
	})
}

// serverClock estimates the API server's clock from the Date headers of its
// responses, so that every holder writes and judges lease times by one clock.
type serverClock struct {
	mu     sync.Mutex
	offset time.Duration // server time minus local time
}

func (c *serverClock) observe(serverNow time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset = time.Until(serverNow)
}

// now is the API server's time as best known: the local time until a response
// has been seen.
func (c *serverClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

type clockTransport struct {
	next  http.RoundTripper
	clock *serverClock
}

func (t *clockTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		if d, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
			// The header truncates to the second: the middle of that second is closer.
			t.clock.observe(d.Add(500 * time.Millisecond))
		}
	}
	return resp, err
}

// ClusterName reads the name the cluster's Lease in namespace (default
// DefaultNamespace) keeps (AnnotationCluster): the metadata.name of the cluster
// file last applied to it; empty when there is none. For a run that takes no
// lease (a dry run) but checks the name as Lock would.
func ClusterName(ctx context.Context, c *kube.Client, namespace string) (string, error) {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	var cur *coordinationv1.Lease
	err := c.Retry(ctx, func(ctx context.Context) error {
		var err error
		cur, err = c.Core.CoordinationV1().Leases(namespace).Get(ctx, Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cur = nil
			return nil
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("read the operation lease %s/%s: %w", namespace, Name, err)
	}
	if cur == nil {
		return "", nil
	}
	return cur.Annotations[AnnotationCluster], nil
}
