package hosts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// ForgetRemovedHosts is the provider.Option of `up --forget-removed-hosts`: a host removed from cluster.yaml that cannot be reached is
// forgotten — its Node deleted, its files left on it — instead of failing
// the run.
type ForgetRemovedHosts struct{}

// Provider implements provider.Option.
func (ForgetRemovedHosts) Provider() string { return Name }

func (ForgetRemovedHosts) String() string { return "--forget-removed-hosts" }

// hostRecord is a host as the state directory keeps it (hosts.json), so that
// one removed from cluster.yaml can still be reached, drained and cleaned.
type hostRecord struct {
	Node    string `json:"node"`
	Pool    string `json:"pool"`
	Address string `json:"address"`
	Port    int    `json:"port"`
	User    string `json:"user"`
	KeyFile string `json:"keyFile,omitempty"`
	Agent   bool   `json:"agent,omitempty"`
	Jump    *Jump  `json:"jump,omitempty"`
	// KeySecretRef is the host's keySecretRef (the key itself is not kept).
	KeySecretRef *v1alpha1.SecretKeyRef `json:"keySecretRef,omitempty"`
}

func (p *Provider) recordFile() string { return filepath.Join(p.opts.StateDir, "hosts.json") }

// recorded are the hosts the last run left in the state directory.
func (p *Provider) recorded() ([]hostRecord, error) {
	b, err := os.ReadFile(p.recordFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []hostRecord
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", p.recordFile(), err)
	}
	return out, nil
}

// removedHosts are the recorded hosts whose address is no longer in
// cluster.yaml, with the SSH settings they were reached with.
func (p *Provider) removedHosts() ([]*Host, error) {
	recs, err := p.recorded()
	if err != nil {
		return nil, err
	}
	var out []*Host
	for _, r := range recs {
		if slices.ContainsFunc(p.hosts, func(h *Host) bool { return h.Address == r.Address }) {
			continue
		}
		out = append(out, &Host{Node: r.Node, Pool: r.Pool, Field: "removed from " + field + ".pools", Address: r.Address,
			Port: r.Port, User: r.User, KeyFile: r.KeyFile, Agent: r.Agent, Jump: r.Jump, keySecret: r.KeySecretRef, timeouts: p.timeouts})
	}
	return out, nil
}

// checkRenames refuses a host whose Node name would change: at the same
// address, the last run named it otherwise (a host removed before it in its
// pool, or the pools reordered). Renaming a running node (its kubelet's
// identity, its bootstrap) is not built.
func (p *Provider) checkRenames() error {
	recs, err := p.recorded()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range p.hosts {
		for _, r := range recs {
			if r.Address == h.Address && r.Node != h.Node {
				errs = append(errs, fmt.Errorf("%s: this host is node %s and would become %s: renaming a running node is not built; remove a pool's last hosts, not earlier ones, and keep the hosts' order", h.Field, r.Node, h.Node))
			}
		}
	}
	return errors.Join(errs...)
}

// writeRecord keeps the hosts of cluster.yaml and the removed hosts not yet
// removed (kept) in the state directory.
func (p *Provider) writeRecord(kept []*Host) error {
	var recs []hostRecord
	for _, h := range slices.Concat(p.hosts, kept) {
		recs = append(recs, hostRecord{Node: h.Node, Pool: h.Pool, Address: h.Address, Port: h.Port, User: h.User, KeyFile: h.KeyFile, Agent: h.Agent, Jump: h.Jump, KeySecretRef: h.keySecret})
	}
	b, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.opts.StateDir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(p.recordFile(), append(b, '\n'), 0o600)
}

// removeHosts takes each removed host out of the cluster, one at a time:
// cordon and drain its Node (bounded, PodDisruptionBudgets hold), delete it,
// and clean the host over SSH as down does. A host that cannot be reached is
// named, and kept for the next run — unless forget (up --forget-removed-hosts): then its
// Node is deleted and it is forgotten, its files left on it. It returns the
// hosts still to remove.
func (p *Provider) removeHosts(ctx context.Context, kc kubernetes.Interface, removed []*Host, forget bool) ([]*Host, error) {
	var kept []*Host
	failed := map[string]error{}
	for _, h := range removed {
		reached := false
		err := p.eachHost(ctx, []*Host{h}, func(ctx context.Context, c *client) error {
			reached = true
			p.event(h.Node, h.Node, "removed from cluster.yaml: drain, delete its Node, clean the host", false)
			if err := dropNode(ctx, kc, h.Node, p.timeouts.drain); err != nil {
				return fmt.Errorf("%s: node %s: %w", label(h), h.Node, err)
			}
			if err := c.clean(ctx); err != nil {
				return err
			}
			p.event(h.Node, h.Node, "removed, clean", true)
			return nil
		})
		switch {
		case err == nil:
		case !reached && forget:
			p.event(h.Node, h.Node, "unreachable: forgotten (--forget-removed-hosts), its files left on it", false)
			if err := deleteNode(ctx, kc, h.Node); err != nil {
				kept = append(kept, h)
				failed[h.Address] = fmt.Errorf("%s: %w", label(h), err)
				continue
			}
			p.event(h.Node, h.Node, "forgotten", true)
		case !reached:
			kept = append(kept, h)
			failed[h.Address] = fmt.Errorf("%w; it is no longer in cluster.yaml and kubeplug cannot clean it: start it (or its sshd) and run up again, or run `kubeplug up --forget-removed-hosts` to forget it (its Node is deleted, its files stay on it)", failedOf(err, h))
		default:
			kept = append(kept, h)
			failed[h.Address] = failedOf(err, h)
		}
	}
	if len(failed) > 0 {
		return kept, &HostError{Failed: failed}
	}
	return kept, nil
}

// dropNode drains the Node and deletes it; a Node that is not there is done.
func dropNode(ctx context.Context, kc kubernetes.Interface, node string, drainTimeout time.Duration) error {
	if _, err := kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if err := provider.Drain(ctx, kc, node, drainTimeout); err != nil {
		return err
	}
	return deleteNode(ctx, kc, node)
}

func deleteNode(ctx context.Context, kc kubernetes.Interface, node string) error {
	if err := kc.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s: %w", node, err)
	}
	return nil
}
