package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The membership of a stacked control plane's etcd: one member per
// control-plane machine, named after it. Replacing a machine replaces its
// member (kops' etcd-manager and kubeadm's documented procedure): the old
// member is removed while the others keep quorum, the new one added with its
// peer URL, and the new machine's etcd starts with --initial-cluster-state
// existing.

// ErrQuorumLost is returned when fewer than a majority of the members answer:
// etcd accepts no write, so no member can be removed or added.
var ErrQuorumLost = errors.New("etcd has lost quorum")

// etcdMember is one member as the cluster's membership lists it.
type etcdMember struct {
	ID       uint64
	Name     string
	PeerURLs []string
	// ClientURL is the member's first client URL; empty for a member added
	// but not started.
	ClientURL string
	// Healthy says whether the member answered a status request.
	Healthy bool
}

// etcdMembers lists the members through whichever of endpoints answers, and
// asks each member for its status. The error wraps ErrQuorumLost when fewer
// than a majority answer, naming those that do not and what to do.
func etcdMembers(ctx context.Context, endpoints []string) ([]etcdMember, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd at %s: %w", strings.Join(endpoints, ","), err)
	}
	defer func() { _ = cli.Close() }()
	// The member list is served by the member the client reaches, from its
	// own copy (not a linearized read): it answers without quorum too.
	var list *clientv3.MemberListResponse
	var listErr error
	for _, ep := range endpoints {
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		one, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err == nil {
			list, err = one.MemberList(lctx, clientv3.WithSerializable())
			_ = one.Close()
		}
		cancel()
		if err == nil {
			break
		}
		listErr = errors.Join(listErr, fmt.Errorf("%s: %w", ep, err))
	}
	if list == nil {
		return nil, fmt.Errorf("%w: no etcd member answers (%w)", ErrQuorumLost, listErr)
	}
	var out []etcdMember
	for _, m := range list.Members {
		em := etcdMember{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs}
		if len(m.ClientURLs) > 0 {
			em.ClientURL = m.ClientURLs[0]
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := cli.Status(sctx, em.ClientURL)
			cancel()
			em.Healthy = err == nil
		}
		out = append(out, em)
	}
	slices.SortFunc(out, func(a, b etcdMember) int { return strings.Compare(a.Name, b.Name) })
	return out, quorum(out)
}

// quorum returns an error wrapping ErrQuorumLost unless a majority of members
// is healthy.
func quorum(members []etcdMember) error {
	var up, down []string
	for _, m := range members {
		if m.Healthy {
			up = append(up, m.Name)
		} else {
			down = append(down, cmpName(m))
		}
	}
	if len(up) > len(members)/2 {
		return nil
	}
	return fmt.Errorf("%w: %d of %d members answer (%s do not); etcd accepts no write without a majority, so `up` cannot replace the lost machines: "+
		"bring them back if their data is there (start their machines again), else restore the cluster from a snapshot: `kubeplug down --purge`, then `kubeplug up --restore-from FILE` (kubeplug etcd snapshot wrote FILE)",
		ErrQuorumLost, len(up), len(members), strings.Join(down, ", "))
}

func cmpName(m etcdMember) string {
	if m.Name != "" {
		return m.Name
	}
	return strings.Join(m.PeerURLs, ",")
}

// replaceEtcdMember removes the member named name (or, for a member added but
// never started, the one with peerURL) and adds a member with peerURL in its
// place, through the healthy members. It returns the --initial-cluster value
// the new member starts with (NAME=PEERURL for every member, the new one
// under name). It refuses when quorum is lost or when removing the member
// would lose it.
func replaceEtcdMember(ctx context.Context, endpoints []string, name, peerURL string) (string, error) {
	members, err := etcdMembers(ctx, endpoints)
	if err != nil {
		return "", err
	}
	var healthy []string
	for _, m := range members {
		if m.Healthy && m.Name != name {
			healthy = append(healthy, m.ClientURL)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: healthy, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return "", fmt.Errorf("etcd at %s: %w", strings.Join(healthy, ","), err)
	}
	defer func() { _ = cli.Close() }()
	var others []string
	for _, m := range members {
		if m.Name == name || slices.Contains(m.PeerURLs, peerURL) {
			if m.Healthy && len(healthy) <= len(members)/2 {
				return "", fmt.Errorf("%w: removing member %s would leave %d of %d", ErrQuorumLost, m.Name, len(healthy), len(members))
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := cli.MemberRemove(rctx, m.ID)
			cancel()
			if err != nil {
				return "", fmt.Errorf("remove etcd member %s (%x): %w", cmpName(m), m.ID, err)
			}
			continue
		}
		for _, u := range m.PeerURLs {
			others = append(others, m.Name+"="+u)
		}
	}
	if err := addEtcdMember(ctx, cli, name, peerURL); err != nil {
		return "", err
	}
	return strings.Join(append(others, name+"="+peerURL), ","), nil
}

// addEtcdMember adds the member name at peerURL. etcd refuses a new member
// ("unhealthy cluster") until the leader has been connected to a quorum for a
// few seconds, as it is not right after a removal: that is retried for 30 s.
func addEtcdMember(ctx context.Context, cli *clientv3.Client, name, peerURL string) error {
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := cli.MemberAdd(actx, []string{peerURL})
		if err == nil {
			return nil
		}
		if !strings.Contains(err.Error(), "unhealthy cluster") || actx.Err() != nil {
			return fmt.Errorf("add etcd member %s at %s: %w", name, peerURL, err)
		}
		select {
		case <-actx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}
