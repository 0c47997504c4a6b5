package controller

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// Sharding splits the fleet among replicas. A target cluster belongs to shard
// fnv32a("namespace/name") mod Shards (the controller's own cluster to the
// shard of ""); its installations and TargetCluster are reconciled by the
// replica that holds that shard's Lease, kubeplug-controller-shard-N, and by no
// other. Rollouts and catalogs are sharded by their own namespace/name.
//
// Each replica also keeps a member Lease, kubeplug-controller-member-ID, so
// that every replica knows how many are alive and takes no more than its fair
// share, ceil(Shards / members), of the shards: of three replicas and six
// shards each holds two, and when one dies the two left take its two over once
// its Leases expire. A replica that stops (SIGTERM) gives its Leases up at once.
//
// A handover cannot make two replicas apply to one cluster at the same time:
// a replica drops a shard it could not renew before the Lease expires, and
// every apply holds the cluster's operation lease besides.

// shardOf is the shard of a key ("namespace/name") among n.
func shardOf(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// shardLeaseName and memberLeaseName are the Leases of a shard and a replica.
func shardLeaseName(i int) string      { return fmt.Sprintf("kubeplug-controller-shard-%d", i) }
func memberLeaseName(id string) string { return "kubeplug-controller-member-" + id }
func isMemberLease(l *coordinationv1.Lease) bool {
	return strings.HasPrefix(l.Name, memberLeaseName(""))
}

// shards is this replica's part of the fleet; nil when not sharded (it owns
// everything).
type shards struct {
	n         int
	id        string
	namespace string
	cs        kubernetes.Interface
	// duration is how long a Lease lasts without renewal.
	duration time.Duration
	log      *slog.Logger
	// gained receives a generic event for each shard this replica takes, for
	// the reconcilers to enqueue what they skipped while they did not hold it.
	gained []chan event.GenericEvent
	now    func() time.Time

	mu sync.Mutex
	// held maps each shard held to when it was last renewed.
	held map[int]time.Time
}

// owns says whether this replica reconciles what belongs to key.
func (s *shards) owns(key string) bool {
	if s == nil {
		return true
	}
	i := shardOf(key, s.n)
	s.mu.Lock()
	defer s.mu.Unlock()
	renewed, ok := s.held[i]
	// Not renewed for two thirds of the duration: another replica may take it
	// soon; stop before it can.
	return ok && s.now().Sub(renewed) < s.duration*2/3
}

// heldShards lists the shards held, sorted.
func (s *shards) heldShards() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for i := range s.held {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// Start keeps the member and shard Leases until ctx is done, then gives them
// up (a manager.Runnable that runs on every replica, leader or not).
func (s *shards) Start(ctx context.Context) error {
	tick := time.NewTicker(max(s.duration/4, 100*time.Millisecond))
	defer tick.Stop()
	for {
		s.round(ctx)
		select {
		case <-ctx.Done():
			s.giveUp() //nolint:contextcheck // ctx is done: the Leases are given up with a fresh, short timeout
			return nil
		case <-tick.C:
		}
	}
}

// NeedLeaderElection: every replica keeps its shards.
func (s *shards) NeedLeaderElection() bool { return false }

// round renews this replica's member Lease and shards, takes free or expired
// shards up to its fair share, and gives up the ones beyond it.
func (s *shards) round(ctx context.Context) {
	now := s.now()
	if err := s.renew(ctx, memberLeaseName(s.id), true); err != nil {
		s.log.Warn("cannot renew the replica's member lease", "replica", s.id, "error", err)
	}
	leases, err := s.cs.CoordinationV1().Leases(s.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		s.log.Warn("cannot list the shard leases", "error", err)
		return
	}
	byName, members, held := s.census(leases.Items, now)
	fair := (s.n + max(members, 1) - 1) / max(members, 1)
	for i := range s.n {
		name := shardLeaseName(i)
		l := byName[name]
		mine := l != nil && holder(l) == s.id
		switch {
		case mine && held > fair:
			// Beyond the fair share (a replica joined): give it up, the
			// lowest first, so that the newcomer takes it.
			s.yieldShard(ctx, i, l, members)
			held--
		case mine:
			s.holdShard(ctx, i, l, now)
		case held < fair && (l == nil || holder(l) == "" || s.expired(l, now)):
			if s.takeShard(ctx, i, name, l, now, members) {
				held++
			}
		default:
			s.drop(i)
		}
	}
}

// census indexes the Leases by name, and counts the replicas' live member
// Leases and the shards this replica holds unexpired.
func (s *shards) census(leases []coordinationv1.Lease, now time.Time) (byName map[string]*coordinationv1.Lease, members, held int) {
	byName = map[string]*coordinationv1.Lease{}
	for i := range leases {
		l := &leases[i]
		byName[l.Name] = l
		if isMemberLease(l) && !s.expired(l, now) {
			members++
		}
	}
	for i := range s.n {
		l := byName[shardLeaseName(i)]
		if l != nil && holder(l) == s.id && !s.expired(l, now) {
			held++
		}
	}
	return byName, members, held
}

// yieldShard gives up shard i, held in l, beyond this replica's fair share.
func (s *shards) yieldShard(ctx context.Context, i int, l *coordinationv1.Lease, members int) {
	s.drop(i)
	if err := s.release(ctx, l); err != nil {
		s.log.Warn("cannot give up a shard", "shard", i, "error", err)
	}
	s.log.Info("shard given up", "shard", i, "replica", s.id, "members", members)
}

// holdShard renews shard i's Lease l, and drops the shard when that fails.
func (s *shards) holdShard(ctx context.Context, i int, l *coordinationv1.Lease, now time.Time) {
	if err := s.update(ctx, l, now); err != nil {
		s.drop(i)
		s.log.Warn("shard lost", "shard", i, "replica", s.id, "error", err)
		return
	}
	s.keep(i, now)
}

// takeShard takes free or expired shard i (its Lease l, nil when there is
// none yet) and tells the gained channels; false when another replica was
// faster.
func (s *shards) takeShard(ctx context.Context, i int, name string, l *coordinationv1.Lease, now time.Time, members int) bool {
	if err := s.take(ctx, name, l, now); err != nil {
		return false // another replica was faster
	}
	s.keep(i, now)
	s.log.Info("shard taken", "shard", i, "replica", s.id, "members", members)
	for _, ch := range s.gained {
		select {
		case ch <- event.GenericEvent{}:
		default: // one is pending: it enqueues everything anyway
		}
	}
	return true
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func (s *shards) expired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return now.After(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

func (s *shards) keep(i int, at time.Time) {
	s.mu.Lock()
	s.held[i] = at
	s.mu.Unlock()
}

func (s *shards) drop(i int) {
	s.mu.Lock()
	delete(s.held, i)
	s.mu.Unlock()
}

func (s *shards) seconds() *int32 { return ptr(int32(max(s.duration/time.Second, 1))) }

// renew renews (or creates) a Lease this replica holds.
func (s *shards) renew(ctx context.Context, name string, create bool) error {
	l, err := s.cs.CoordinationV1().Leases(s.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && create {
		return s.take(ctx, name, nil, s.now())
	}
	if err != nil {
		return err
	}
	return s.update(ctx, l, s.now())
}

// update renews l, held by this replica; a conflict means another replica
// changed it.
func (s *shards) update(ctx context.Context, l *coordinationv1.Lease, now time.Time) error {
	l = l.DeepCopy()
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &s.id, s.seconds()
	l.Spec.RenewTime = &metav1.MicroTime{Time: now}
	_, err := s.cs.CoordinationV1().Leases(s.namespace).Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// take takes Lease name, free or expired as l shows it (nil: absent); the
// update fails when another replica changed it since.
func (s *shards) take(ctx context.Context, name string, l *coordinationv1.Lease, now time.Time) error {
	if l == nil {
		_, err := s.cs.CoordinationV1().Leases(s.namespace).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.namespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &s.id, LeaseDurationSeconds: s.seconds(),
				AcquireTime: &metav1.MicroTime{Time: now}, RenewTime: &metav1.MicroTime{Time: now}},
		}, metav1.CreateOptions{})
		return err
	}
	l = l.DeepCopy()
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &s.id, s.seconds()
	l.Spec.AcquireTime, l.Spec.RenewTime = &metav1.MicroTime{Time: now}, &metav1.MicroTime{Time: now}
	l.Spec.LeaseTransitions = ptr(ptrValue(l.Spec.LeaseTransitions) + 1)
	_, err := s.cs.CoordinationV1().Leases(s.namespace).Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// release gives l up: no holder, so that any replica may take it at once.
func (s *shards) release(ctx context.Context, l *coordinationv1.Lease) error {
	l = l.DeepCopy()
	l.Spec.HolderIdentity = nil
	_, err := s.cs.CoordinationV1().Leases(s.namespace).Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// giveUp releases every shard held and deletes the member Lease (the replica
// stops), with a fresh short timeout.
func (s *shards) giveUp() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, i := range s.heldShards() {
		s.drop(i)
		l, err := s.cs.CoordinationV1().Leases(s.namespace).Get(ctx, shardLeaseName(i), metav1.GetOptions{})
		if err == nil && holder(l) == s.id {
			err = s.release(ctx, l)
		}
		if err != nil {
			s.log.Warn("cannot give up a shard; it expires by itself", "shard", i, "error", err)
		}
	}
	_ = s.cs.CoordinationV1().Leases(s.namespace).Delete(ctx, memberLeaseName(s.id), metav1.DeleteOptions{})
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
