package lease_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/lease"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

func newClient(t *testing.T) *kube.Client {
	t.Helper()
	c, err := kube.New(testcluster.RESTConfig(t), kube.Options{Logger: testcluster.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func getLease(t *testing.T, ns string) *coordinationv1.Lease {
	t.Helper()
	l, err := testcluster.Client(t).CoordinationV1().Leases(ns).Get(context.Background(), lease.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the lease: %v", err)
	}
	return l
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestLockSecondRunFailsOrWaits takes the lease, checks that a second run fails at
// once with a message naming the holder, and that one willing to wait gets the
// lease only after the first released it.
func TestLockSecondRunFailsOrWaits(t *testing.T) {
	ns := testcluster.Namespace(t)
	d1 := newClient(t)
	d2 := newClient(t)
	ctx := t.Context()

	_, release1, err := lease.Lock(ctx, d1, lease.Options{Namespace: ns, Operation: "apply", Identity: "host-a/111/aaaaaa"})
	if err != nil {
		t.Fatal(err)
	}
	l := getLease(t, ns)
	if holder(l) != "host-a/111/aaaaaa" || l.Annotations[lease.AnnotationOperation] != "apply" || l.Annotations[lease.AnnotationHolder] != "host-a/111" {
		t.Errorf("lease holder %q, annotations %v", holder(l), l.Annotations)
	}

	_, _, err = lease.Lock(ctx, d2, lease.Options{Namespace: ns, Operation: "uninstall"})
	var le *lease.LockedError
	if !errors.As(err, &le) || !errors.Is(err, lease.ErrLocked) {
		t.Fatalf("second Lock = %v, want a *LockedError", err)
	}
	msg := err.Error()
	for _, want := range []string{"another kubeplug operation holds the cluster's lease: apply by host-a/111 since ", " UTC (expires in ", "; wait with --lock-timeout or retry"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}

	var released atomic.Bool
	var told atomic.Int32
	got := make(chan error, 1)
	go func() {
		waiting := func(e *lease.LockedError) {
			if e.Holder == "host-a/111" && e.Operation == "apply" && e.ExpiresIn > 0 {
				told.Add(1)
			}
		}
		_, release2, err := lease.Lock(ctx, d2, lease.Options{Namespace: ns, Operation: "uninstall", Wait: time.Minute, Waiting: waiting})
		if err == nil {
			if !released.Load() {
				err = errors.New("took the lease while the first run held it")
			}
			err = errors.Join(err, release2(ctx))
		}
		got <- err
	}()
	// Let the waiter see the lease held at least once before releasing it.
	time.Sleep(1500 * time.Millisecond)
	released.Store(true)
	if err := release1(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting Lock: %v", err)
	}
	// Told once that it waits, naming the holder (not once per poll).
	if n := told.Load(); n != 1 {
		t.Errorf("the waiting run was told %d times, want once (within 10s)", n)
	}
	l = getLease(t, ns)
	if holder(l) != "" {
		t.Errorf("lease still held by %q after both released", holder(l))
	}
	if l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != 1 {
		t.Errorf("leaseTransitions = %v, want 1", l.Spec.LeaseTransitions)
	}
}

// TestLockConcurrent starts several runs at once: exactly one gets the lease.
func TestLockConcurrent(t *testing.T) {
	ns := testcluster.Namespace(t)
	const n = 6
	type result struct {
		release func(context.Context) error
		err     error
	}
	results := make(chan result, n)
	for range n {
		d := newClient(t)
		go func() {
			_, release, err := lease.Lock(t.Context(), d, lease.Options{Namespace: ns, Operation: "apply"})
			results <- result{release, err}
		}()
	}
	var winners []func(context.Context) error
	for range n {
		r := <-results
		switch {
		case r.err == nil:
			winners = append(winners, r.release)
		case !errors.Is(r.err, lease.ErrLocked):
			t.Errorf("Lock = %v, want ErrLocked or success", r.err)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d runs got the lease, want exactly 1", len(winners))
	}
	if err := winners[0](t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestLockTakesOverExpired finds the lease of a run that died (never renewed
// since long ago) and takes it over without waiting; and one whose holder's clock
// runs an hour ahead, once it has stayed unchanged for its duration.
func TestLockTakesOverExpired(t *testing.T) {
	ns := testcluster.Namespace(t)
	leases := testcluster.Client(t).CoordinationV1().Leases(ns)
	old := metav1.NewMicroTime(time.Now().Add(-time.Minute))
	_, err := leases.Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: lease.Name, Annotations: map[string]string{lease.AnnotationOperation: "apply", lease.AnnotationHolder: "dead/1"}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("dead/1/abcdef"), LeaseDurationSeconds: ptr.To[int32](30),
			AcquireTime: &old, RenewTime: &old, LeaseTransitions: ptr.To[int32](4),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := newClient(t)
	_, release, err := lease.Lock(t.Context(), d, lease.Options{Namespace: ns, Operation: "apply"})
	if err != nil {
		t.Fatalf("Lock over an expired lease: %v", err)
	}
	l := getLease(t, ns)
	if h := holder(l); h == "dead/1/abcdef" || h == "" {
		t.Errorf("holder = %q after taking over", h)
	}
	if *l.Spec.LeaseTransitions != 5 {
		t.Errorf("leaseTransitions = %d, want 5", *l.Spec.LeaseTransitions)
	}
	if err := release(t.Context()); err != nil {
		t.Fatal(err)
	}

	// A holder whose clock is an hour ahead wrote a renewTime in the future: the
	// record, unchanged for longer than its duration, has expired all the same.
	l = getLease(t, ns)
	future := metav1.NewMicroTime(time.Now().Add(time.Hour))
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = ptr.To("skewed/2/abcdef"), ptr.To[int32](2)
	l.Spec.AcquireTime, l.Spec.RenewTime = &future, &future
	if _, err := leases.Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := lease.Lock(t.Context(), d, lease.Options{Namespace: ns, Operation: "apply"}); !errors.Is(err, lease.ErrLocked) {
		t.Fatalf("Lock without waiting = %v, want ErrLocked", err)
	}
	_, release, err = lease.Lock(t.Context(), d, lease.Options{Namespace: ns, Operation: "apply", Wait: time.Minute})
	if err != nil {
		t.Fatalf("Lock over a skewed holder's stale lease: %v", err)
	}
	if err := release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestLockRenews holds a 2s lease for several of its durations: renewal keeps it,
// so another run still finds it held, and the holder's context is not cancelled.
func TestLockRenews(t *testing.T) {
	ns := testcluster.Namespace(t)
	d1 := newClient(t)
	ctx, release, err := lease.Lock(t.Context(), d1, lease.Options{Namespace: ns, Operation: "apply", Duration: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	first := getLease(t, ns).Spec.RenewTime.Time
	time.Sleep(5 * time.Second)
	if err := context.Cause(ctx); err != nil {
		t.Fatalf("operation context ended: %v", err)
	}
	if renewed := getLease(t, ns).Spec.RenewTime.Time; !renewed.After(first) {
		t.Errorf("renewTime %v not after %v", renewed, first)
	}
	d2 := newClient(t)
	if _, _, err := lease.Lock(t.Context(), d2, lease.Options{Namespace: ns, Operation: "apply"}); !errors.Is(err, lease.ErrLocked) {
		t.Fatalf("Lock while a renewed lease is held = %v, want ErrLocked", err)
	}
	if err := release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h := holder(getLease(t, ns)); h != "" {
		t.Errorf("holder = %q after release", h)
	}
}

// TestLockLost has another writer take the lease over: the holder's context is
// cancelled with ErrLeaseLost, and its release leaves the new holder alone.
func TestLockLost(t *testing.T) {
	ns := testcluster.Namespace(t)
	d := newClient(t)
	ctx, release, err := lease.Lock(t.Context(), d, lease.Options{Namespace: ns, Operation: "apply", Duration: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l := getLease(t, ns)
	l.Spec.HolderIdentity = ptr.To("thief/3/abcdef")
	if _, err := testcluster.Client(t).CoordinationV1().Leases(ns).Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the operation context was not cancelled after the lease was taken")
	}
	if err := context.Cause(ctx); !errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("cause = %v, want ErrLeaseLost", err)
	}
	if err := release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h := holder(getLease(t, ns)); h != "thief/3/abcdef" {
		t.Errorf("holder = %q after the loser released, want the thief", h)
	}
}

// TestLockReleaseAfterCancel releases with a cancelled context, as a run
// interrupted by Ctrl-C does: the lease is freed all the same.
func TestLockReleaseAfterCancel(t *testing.T) {
	ns := testcluster.Namespace(t)
	d := newClient(t)
	ctx, cancel := context.WithCancel(t.Context())
	opCtx, release, err := lease.Lock(ctx, d, lease.Options{Namespace: ns, Operation: "apply"})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	<-opCtx.Done()
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	if h := holder(getLease(t, ns)); h != "" {
		t.Errorf("holder = %q after release", h)
	}
}

// TestLockDryRun takes no lease.
func TestLockDryRun(t *testing.T) {
	ns := testcluster.Namespace(t)
	d := newClient(t)
	_, release, err := lease.Lock(t.Context(), d, lease.Options{Namespace: ns, Operation: "apply", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = release(t.Context()) }()
	_, err = testcluster.Client(t).CoordinationV1().Leases(ns).Get(t.Context(), lease.Name, metav1.GetOptions{})
	if err == nil {
		t.Error("a dry run created the lease")
	}
}

// TestLockNamesTheCluster: a run applying a cluster file names the cluster on
// the Lease, and the name stays when the lease is freed and when a run that
// applies no file (uninstall) holds it. A run of another name is asked, once,
// whether it may rename the cluster: refusing writes nothing; accepting renames.
func TestLockNamesTheCluster(t *testing.T) {
	ns := testcluster.Namespace(t)
	d := newClient(t)
	ctx := t.Context()
	lock := func(opts lease.Options) error {
		opts.Namespace = ns
		_, release, err := lease.Lock(ctx, d, opts)
		if err != nil {
			return err
		}
		return release(ctx)
	}
	named := func() string { return getLease(t, ns).Annotations[lease.AnnotationCluster] }
	never := func(prev string) error {
		t.Errorf("OtherCluster(%q) called, want no call", prev)
		return nil
	}

	if err := lock(lease.Options{Operation: "apply", Cluster: "one", OtherCluster: never}); err != nil {
		t.Fatal(err)
	}
	if got := named(); got != "one" {
		t.Fatalf("freed lease names cluster %q, want one", got)
	}
	if got, err := lease.ClusterName(ctx, d, ns); err != nil || got != "one" {
		t.Fatalf("ClusterName = %q, %v; want one", got, err)
	}
	if got, err := lease.ClusterName(ctx, d, ns+"-none"); err != nil || got != "" {
		t.Fatalf("ClusterName without a Lease = %q, %v; want none", got, err)
	}
	if err := lock(lease.Options{Operation: "uninstall"}); err != nil {
		t.Fatal(err)
	}
	if got := named(); got != "one" {
		t.Fatalf("after an uninstall the lease names cluster %q, want one", got)
	}

	errOther := errors.New("another cluster")
	var asked []string
	refuse := func(prev string) error { asked = append(asked, prev); return errOther }
	before := getLease(t, ns).ResourceVersion
	if err := lock(lease.Options{Operation: "apply", Cluster: "three", OtherCluster: refuse}); err != errOther { //nolint:errorlint // returned as it is
		t.Fatalf("Lock of another name = %v, want OtherCluster's error as it is", err)
	}
	if len(asked) != 1 || asked[0] != "one" {
		t.Errorf("OtherCluster asked with %q, want once with one", asked)
	}
	if rv := getLease(t, ns).ResourceVersion; rv != before {
		t.Errorf("a refused Lock wrote the lease (resourceVersion %s -> %s)", before, rv)
	}

	asked = nil
	accept := func(prev string) error { asked = append(asked, prev); return nil }
	if err := lock(lease.Options{Operation: "apply", Cluster: "three", OtherCluster: accept}); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0] != "one" {
		t.Errorf("OtherCluster asked with %q, want once with one", asked)
	}
	if got := named(); got != "three" {
		t.Fatalf("after an accepted rename the lease names cluster %q, want three", got)
	}
	if err := lock(lease.Options{Operation: "apply", Cluster: "three", OtherCluster: never}); err != nil {
		t.Fatal(err)
	}
}

// TestLockMakesItsNamespaceOnlyWhenNoLeaseIsThere takes the lease in a
// namespace that does not exist (Lock makes it), then again with a new client:
// the lease found there shows its namespace exists, so that run creates no
// namespace — neither for the lease nor for the records written after it —
// and its release is one write.
func TestLockMakesItsNamespaceOnlyWhenNoLeaseIsThere(t *testing.T) {
	ns := "kp-lease-ns-" + strings.ToLower(time.Now().Format("150405.000000"))
	ns = strings.ReplaceAll(ns, ".", "")
	cs := testcluster.Client(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	ctx := t.Context()
	_, release, err := lease.Lock(ctx, newClient(t), lease.Options{Namespace: ns, Operation: "apply"})
	if err != nil {
		t.Fatalf("Lock in a namespace that does not exist: %v", err)
	}
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}

	var creates, requests atomic.Int32
	cfg := testcluster.RESTConfig(t)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/api/v1/namespaces") {
				creates.Add(1)
			}
			requests.Add(1)
			return rt.RoundTrip(r)
		})
	}
	c, err := kube.New(cfg, kube.Options{Logger: testcluster.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, release, err = lease.Lock(ctx, c, lease.Options{Namespace: ns, Operation: "apply"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureNamespace(ctx, ns); err != nil { // what the records' first write does
		t.Fatal(err)
	}
	if n := creates.Load(); n != 0 {
		t.Errorf("%d namespace create(s) with the lease already there, want none", n)
	}
	// Freed in one write, of the version this holder wrote: no read first.
	requests.Store(0)
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("release sent %d requests, want 1", n)
	}
	if h := holder(getLease(t, ns)); h != "" {
		t.Errorf("holder %q after release, want none", h)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
