package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubeplug/kubeplug/pkg/provider"
)

// Rolling replacement of a stacked control plane's machines (CAPI's
// KubeadmControlPlane rollout, kops' rolling update): when the control-plane
// pool's boot files change — a new Kubernetes version above all, whose static
// Pods name the new images — each running control-plane machine is replaced
// in turn, never two at once: etcd's members all answer (else it stops,
// naming the one that does not), the Node is cordoned and drained, etcd's
// leadership moves off the member if it leads, the machine is removed, its
// member removed and a new one added at its address through the other two
// (quorum 2 of 2, then 3), and the new machine boots from the new files and
// must have its API server ready, its etcd member healthy and its static Pods
// running before the next machine is touched. The load balancer takes the
// machine out of rotation by its /readyz checks and back once it answers, so
// the API stays available through the others. The workers follow, one at a
// time (upMachineNode). A failure stops the roll at that machine, naming it;
// the next `up` goes on from there: a machine left stopped is replaced as a
// lost one, a machine still on the old files is rolled.

// haPlane is what booting a control-plane machine needs.
type haPlane struct {
	rc      *realCluster
	cps     []*desiredNode
	members []haMember
	// clusterID is the node network's ID (etcd's --initial-cluster-token).
	clusterID string
	// pkiDir is the cluster's PKI on this host.
	pkiDir string
	// server is the API's URL for kubelets and users (the load balancer's
	// with several machines).
	server     string
	kubeconfig string
}

// endpoints are the etcd client URLs of the members.
func (h *haPlane) endpoints() []string {
	var out []string
	for _, m := range h.members {
		out = append(out, m.clientURL())
	}
	return out
}

// apiServer is the URL of machine i's own API server.
func (h *haPlane) apiServer(i int) string {
	return "https://" + net.JoinHostPort(h.members[i].IP.String(), strconv.Itoa(machineAPIServerPort))
}

// startCPMachine boots control-plane machine i with the cluster's files and
// extra as its vendor data. A replacement (the machine's directory was just
// removed) is started once more if runc fails to start it. The instance is
// recorded at once unless a roll records it once the machine is proven
// (rollMember): until then the next up rolls it again.
func (p *Provider) startCPMachine(ctx context.Context, h *haPlane, i int, extra []vendorFile, replacement, record bool) error {
	n, m := h.cps[i], h.cps[i].sys
	vd, err := p.vendorData(m, h.rc, "", extra...)
	if err != nil {
		return fmt.Errorf("machine %s: %w", n.name, err)
	}
	m.VendorData = vd
	p.event("control-plane", "", "booting the control-plane machine "+n.name+" at "+h.members[i].IP.String())
	if err := m.Start(ctx); err != nil {
		if !replacement {
			return err
		}
		// A machine booted right after its predecessor was removed:
		// runc has been seen to fail to start it once, without a word
		// on the console; the second start works.
		p.event("control-plane", n.name, fmt.Sprintf("machine %s: %v; starting it again", n.name, err))
		time.Sleep(2 * time.Second)
		if err := m.Start(ctx); err != nil {
			return err
		}
	}
	if !record {
		return nil
	}
	return p.recordInstance(n)
}

// recordInstance records the instance of the node's machine.
func (p *Provider) recordInstance(n *desiredNode) error {
	return os.WriteFile(p.instanceIDFile(n.name), []byte(n.sys.InstanceID), 0o644)
}

// bootMember boots control-plane machine i of a stacked control plane, its
// etcd member starting with --initial-cluster initial and
// --initial-cluster-state state.
func (p *Provider) bootMember(ctx context.Context, h *haPlane, i int, initial, state string, record bool) error {
	n := h.cps[i]
	extra, err := p.controlPlaneFiles(h.pkiDir, h.apiServer(i), h.server, n.name)
	if err != nil {
		return err
	}
	pods, err := haStaticPods(h.cps[0].machine, h.members[0].IP.String(), h.members[i], h.clusterID, initial, state)
	if err != nil {
		return err
	}
	return p.startCPMachine(ctx, h, i, append(extra, pods...), state == "existing", record)
}

// rollControlPlane replaces the control-plane machines outdated, one at a
// time, in order; it stops at the first that fails.
func (p *Provider) rollControlPlane(ctx context.Context, h *haPlane, outdated []int) error {
	if len(outdated) == 0 {
		return nil
	}
	client, err := kubernetes.NewForConfig(p.cp.RESTConfig())
	if err != nil {
		return err
	}
	for k, i := range outdated {
		name := h.cps[i].name
		began := time.Now()
		p.event("upgrade", name, fmt.Sprintf("control-plane machine %s (%d of %d): its pool's boot files changed, replacing it", name, k+1, len(outdated)))
		if err := p.rollMember(ctx, client, h, i); err != nil {
			var left []string
			for _, j := range outdated[k+1:] {
				left = append(left, h.cps[j].name)
			}
			msg := fmt.Sprintf("replacing control-plane machine %s: %v; the roll stopped there", name, err)
			if len(left) > 0 {
				msg += " (" + strings.Join(left, ", ") + " not replaced yet)"
			}
			return errors.New(msg + "; the other control-plane machines keep serving: fix the cause and run `kubeplug up` again, which goes on from there")
		}
		p.event("upgrade", name, fmt.Sprintf("control-plane machine %s replaced in %s", name, time.Since(began).Round(time.Second)))
	}
	return nil
}

// rollMember replaces running control-plane machine i and its etcd member.
func (p *Provider) rollMember(ctx context.Context, client kubernetes.Interface, h *haPlane, i int) error {
	n, m := h.cps[i], h.cps[i].sys
	initial, err := replaceRunningMember(ctx, h.endpoints(), n.name, h.members[i].peerURL(), func(ctx context.Context) error {
		if err := provider.Drain(ctx, client, n.name, 2*time.Minute); err != nil {
			return fmt.Errorf("drain: %w", err)
		}
		if err := m.Remove(ctx); err != nil {
			return err
		}
		// The old machine's mirror Pods would look ready until the new
		// kubelet replaced them: gone, the new ones are waited for.
		return deleteMirrorPods(ctx, client, n.name)
	})
	if err != nil {
		return err
	}
	if err := p.bootMember(ctx, h, i, initial, "existing", false); err != nil {
		return err
	}
	if err := m.WaitBooted(ctx, 5*time.Minute); err != nil {
		return err
	}
	if err := p.waitAPIServerAt(ctx, m, h.kubeconfig, h.apiServer(i), 4*time.Minute); err != nil {
		return err
	}
	if err := waitMembersHealthy(ctx, h.endpoints(), len(h.cps), 3*time.Minute); err != nil {
		return err
	}
	if err := waitStaticPods(ctx, client, n.name, n.machine, 5*time.Minute); err != nil {
		return err
	}
	patch := []byte(`{"spec":{"unschedulable":null}}`)
	if _, err := client.CoreV1().Nodes().Patch(ctx, n.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("uncordon: %w", err)
	}
	return p.recordInstance(n)
}

// replaceRunningMember replaces the running etcd member name of the members
// at endpoints (one of which is its own) by a new member at peerURL: every
// member must answer first (so that quorum holds without it), its
// leadership moves to another if it leads, stop stops it (drains and removes
// its machine), and it is removed
// and the new one added through the others. It returns the new member's
// --initial-cluster.
func replaceRunningMember(ctx context.Context, endpoints []string, name, peerURL string, stop func(context.Context) error) (string, error) {
	members, err := etcdMembers(ctx, endpoints)
	if err != nil {
		return "", err
	}
	// The member replaced may be down itself (a replacement that did not
	// come up, maybe never started and so nameless): its removal costs no
	// quorum then.
	var others []etcdMember
	for _, m := range members {
		if m.Name != name && !slices.Contains(m.PeerURLs, peerURL) {
			others = append(others, m)
		}
	}
	if err := allHealthy(others, len(endpoints)-1); err != nil {
		return "", fmt.Errorf("%w: replacing %s now could lose etcd's quorum; bring the member back first (`kubeplug up` replaces a lost machine)", err, name)
	}
	var through []string
	for _, m := range others {
		through = append(through, m.ClientURL)
	}
	if err := moveLeaderAway(ctx, members, name); err != nil {
		return "", err
	}
	if err := stop(ctx); err != nil {
		return "", err
	}
	return replaceEtcdMember(ctx, through, name, peerURL)
}

// allHealthy says whether want members are listed and all answer; else the
// error names those that do not.
func allHealthy(members []etcdMember, want int) error {
	var down []string
	for _, m := range members {
		if !m.Healthy {
			down = append(down, cmpName(m))
		}
	}
	switch {
	case len(down) > 0:
		return fmt.Errorf("etcd member %s does not answer", strings.Join(down, ", "))
	case len(members) != want:
		return fmt.Errorf("etcd has %d members, not %d", len(members), want)
	}
	return nil
}

// waitMembersHealthy waits until want members are listed and all answer.
func waitMembersHealthy(ctx context.Context, endpoints []string, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		members, err := etcdMembers(ctx, endpoints)
		if err == nil {
			err = allHealthy(members, want)
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd not back to %d healthy members after %s: %w", want, timeout, err)
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}

// moveLeaderAway hands etcd's leadership to another healthy member when the
// member named name leads, so that its removal costs no election (etcdctl
// move-leader, as kubeadm's and etcd-manager's upgrades do).
func moveLeaderAway(ctx context.Context, members []etcdMember, name string) error {
	var self *etcdMember
	var to uint64
	for i, m := range members {
		switch {
		case m.Name == name:
			self = &members[i]
		case to == 0 && m.Healthy:
			to = m.ID
		}
	}
	// A member that does not answer leads nothing.
	if self == nil || !self.Healthy || self.ClientURL == "" || to == 0 {
		return nil
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{self.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("etcd at %s: %w", self.ClientURL, err)
	}
	defer func() { _ = cli.Close() }()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := cli.Status(sctx, self.ClientURL)
	if err != nil {
		return fmt.Errorf("etcd member %s: status: %w", name, err)
	}
	if st.Leader != self.ID {
		return nil
	}
	if _, err := cli.MoveLeader(sctx, to); err != nil {
		return fmt.Errorf("etcd member %s: move its leadership to %x: %w", name, to, err)
	}
	return nil
}

// deleteMirrorPods deletes the mirror Pods of the node's static Pods.
func deleteMirrorPods(ctx context.Context, client kubernetes.Interface, node string) error {
	pods, err := client.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return err
	}
	for _, pod := range pods.Items {
		if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; !mirror {
			continue
		}
		if err := client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete mirror Pod %s: %w", pod.Name, err)
		}
	}
	return nil
}
