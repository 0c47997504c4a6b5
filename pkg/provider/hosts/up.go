package hosts

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/bootstraptoken"
)

var (
	_ provider.FactSource = (*Provider)(nil)
	_ provider.Stateful   = (*Provider)(nil)
	_ provider.Locator    = (*Provider)(nil)
)

// StateDir implements provider.Stateful.
func (p *Provider) StateDir() string { return p.opts.StateDir }

// Locate implements provider.Locator: the cluster-admin kubeconfig, while
// the API server on the control-plane host answers (down then uninstalls the
// plugins first; else it only cleans the hosts).
func (p *Provider) Locate(ctx context.Context) (string, error) {
	notRunning := fmt.Errorf("cluster %s on hosts (state dir %s): %w", p.opts.ClusterName, p.opts.StateDir, provider.ErrNotRunning)
	cfg, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig())
	if err != nil {
		return "", notRunning
	}
	cfg.Timeout = 5 * time.Second
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	if _, err := kc.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return "", fmt.Errorf("%w (its API server: %w)", notRunning, err)
	}
	return p.Kubeconfig(), nil
}

// Up implements provider.Provider. Before it connects to any host it checks
// the pools against the model, reads every pool's rendered file and the
// control plane's static Pods, and makes (or keeps) the PKI. Then:
//
//  1. every host, in parallel (bounded): preflight; delivery of the pool's
//     files, the node programs and the provider's part of the boot, each
//     verified by its digest on the host, only what differs; the images into
//     the host's own registry;
//  2. the control-plane host runs its runcmd (when anything changed there),
//     and Up waits for its API server, then stores the bootstrap token;
//  3. the workers run theirs and join by TLS bootstrap;
//  4. Up waits until every Node is Ready.
//
// A host that fails is named by its address in the error (a *HostError)
// while the others go on, unless it is the control-plane host.
func (p *Provider) Up(ctx context.Context, d *provider.Desired) (*provider.Running, error) {
	if err := refuseKeyPairs(d); err != nil {
		return nil, err
	}
	if err := p.selectVersion(d.KubernetesVersion); err != nil {
		return nil, err
	}
	scripts, progs, err := p.plan(d)
	if err != nil {
		return nil, err
	}
	cl, err := p.prepareCluster(d)
	if err != nil {
		return nil, err
	}
	tokens, err := p.tokens()
	if err != nil {
		return nil, err
	}
	if err := p.checkRenames(); err != nil {
		return nil, err
	}
	removed, err := p.removedHosts()
	if err != nil {
		return nil, err
	}
	// Every host this run may touch is recorded before it is touched, and
	// the version it brings them to.
	if err := p.writeRecord(removed); err != nil {
		return nil, err
	}
	if err := p.recordVersion(); err != nil {
		return nil, err
	}
	u := &upRun{changed: map[string]bool{}, rolls: map[string]*roll{}, failed: map[string]error{}}
	err = p.prepareHosts(ctx, u, cl, scripts, progs, tokens)
	u.fail(err)
	cp := p.controlPlaneHost()
	if e := u.failed[cp.Address]; e != nil {
		return nil, err
	}
	if err := tokens.save(); err != nil {
		return nil, err
	}
	running, kc, err := p.upControlPlane(ctx, u, cl, scripts, tokens)
	if err != nil {
		return nil, err
	}
	p.joinWorkers(ctx, u, kc, cl, scripts)
	p.rollChanged(ctx, u, kc, cl, scripts)
	if err := p.removeOrKeep(ctx, u, kc, removed); err != nil {
		return running, err
	}
	for _, h := range p.hosts {
		running.Nodes = append(running.Nodes, provider.NodeStatus{Name: h.Node, Pool: h.Pool, Role: roleOf(d, h.Pool), Ready: u.failed[h.Address] == nil})
	}
	slices.SortFunc(running.Nodes, func(a, b provider.NodeStatus) int { return strings.Compare(a.Name, b.Name) })
	if len(u.failed) > 0 {
		return running, &HostError{Failed: u.failed}
	}
	return running, nil
}

// refuseKeyPairs refuses plugins' key pairs for any pool: they would travel
// to the hosts over SSH as the cluster's PKI does; that is not built yet, so
// they are refused, not dropped.
func refuseKeyPairs(d *provider.Desired) error {
	for _, pool := range d.Model.PoolNames() {
		if what, ok := provider.KeyPairPools(d.Model)[pool]; ok {
			return fmt.Errorf("%s goes to pool %s: the hosts provider does not deliver plugins' key pairs yet (the aws provider does, and the local provider to machine pools)", what, pool)
		}
	}
	return nil
}

// upRun is what one Up learns of its hosts, host by host in parallel: which
// had their files changed, which are to be rolled, which failed (by address).
type upRun struct {
	mu      sync.Mutex
	changed map[string]bool
	rolls   map[string]*roll
	failed  map[string]error
}

// fail records the hosts a *HostError names as failed.
func (u *upRun) fail(herr error) {
	var he *HostError
	if errors.As(herr, &he) {
		u.mu.Lock()
		for a, e := range he.Failed {
			u.failed[a] = e
		}
		u.mu.Unlock()
	}
}

// prepareHosts puts every host's files, programs and images in place (step 1
// of Up), recording which changed and which are to be rolled.
func (p *Provider) prepareHosts(ctx context.Context, u *upRun, cl *cluster, scripts map[string]*bootScript, progs []*bootFile, tokens *tokenSet) error {
	return p.eachHost(ctx, p.hosts, func(ctx context.Context, c *client) error {
		ch, r, err := p.prepareHost(ctx, c, cl, scripts[c.host.Pool].Files, progs, tokens)
		if err != nil {
			return err
		}
		u.mu.Lock()
		u.changed[c.host.Node] = ch
		if r != nil {
			u.rolls[c.host.Node] = r
		}
		u.mu.Unlock()
		return nil
	})
}

// upControlPlane boots the control-plane host when its files changed, waits
// for its API server and stores the bootstrap token (step 2 of Up), and
// returns the running cluster so far and a client of it.
func (p *Provider) upControlPlane(ctx context.Context, u *upRun, cl *cluster, scripts map[string]*bootScript, tokens *tokenSet) (*provider.Running, kubernetes.Interface, error) {
	cp := p.controlPlaneHost()
	running := &provider.Running{Kubeconfig: p.Kubeconfig()}
	began := time.Now()
	if u.changed[cp.Node] {
		running.Started = true
		if err := p.eachHost(ctx, []*Host{cp}, func(ctx context.Context, c *client) error {
			p.event(cp.Node, cp.Node, "starting the kubelet and the control plane's static Pods", false)
			return c.boot(ctx, scripts[cp.Pool].Runcmd)
		}); err != nil {
			return nil, nil, err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig())
	if err != nil {
		return nil, nil, err
	}
	if err := p.waitAPIServer(ctx, cfg, cp, p.timeouts.ready); err != nil {
		return nil, nil, err
	}
	if running.Started {
		p.event(cp.Node, cp.Node, fmt.Sprintf("control plane ready at %s in %s", cl.server, time.Since(began).Round(time.Millisecond)), false)
	}
	running.RESTConfig = cfg
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := bootstraptoken.Store(ctx, kc, bootstraptoken.Token{Token: tokens.current, Group: bootstrapGroup, Owner: "hosts", TTL: tokenTTL}); err != nil {
		return nil, nil, err
	}
	return running, kc, nil
}

// joinWorkers boots the workers whose files changed (step 3 of Up), then
// waits until every host that is not to be rolled is Ready (step 4).
func (p *Provider) joinWorkers(ctx context.Context, u *upRun, kc kubernetes.Interface, cl *cluster, scripts map[string]*bootScript) {
	cp := p.controlPlaneHost()
	var workers []*Host
	for _, h := range p.hosts {
		if h != cp && u.failed[h.Address] == nil && u.changed[h.Node] {
			workers = append(workers, h)
		}
	}
	u.fail(p.eachHost(ctx, workers, func(ctx context.Context, c *client) error {
		p.event(c.host.Node, c.host.Node, "joining", false)
		return c.boot(ctx, scripts[c.host.Pool].Runcmd)
	}))
	var ready []*Host
	for _, h := range p.hosts {
		if u.failed[h.Address] == nil && u.rolls[h.Node] == nil {
			ready = append(ready, h)
		}
	}
	u.fail(p.eachHost(ctx, ready, func(ctx context.Context, c *client) error {
		if err := p.nodeReady(ctx, kc, c, cl); err != nil {
			return err
		}
		p.event(c.host.Node, c.host.Node, "Ready", true)
		return nil
	}))
}

// rollChanged rolls the hosts whose files changed, unless another host
// failed: draining a host while another is down could take the last
// replicas, so the roll waits for a run where every host is up.
func (p *Provider) rollChanged(ctx context.Context, u *upRun, kc kubernetes.Interface, cl *cluster, scripts map[string]*bootScript) {
	if len(u.rolls) == 0 {
		return
	}
	if len(u.failed) == 0 {
		u.fail(p.rollAll(ctx, kc, cl, scripts, u.rolls))
		return
	}
	for node, r := range u.rolls {
		u.failed[r.host.Address] = fmt.Errorf("%s: not rolled (its files changed) while other hosts failed", label(r.host))
		p.event(node, node, "not rolled: other hosts failed", true)
	}
}

// removeOrKeep drains and cleans the hosts removed from cluster.yaml, unless
// another host failed, and records those still to remove.
func (p *Provider) removeOrKeep(ctx context.Context, u *upRun, kc kubernetes.Interface, removed []*Host) error {
	if len(removed) == 0 {
		return nil
	}
	kept := removed
	if len(u.failed) > 0 {
		for _, h := range removed {
			u.failed[h.Address] = fmt.Errorf("%s: not removed (drained, cleaned) while other hosts failed", label(h))
		}
	} else {
		var err error
		kept, err = p.removeHosts(ctx, kc, removed, p.opts.ForgetRemovedHosts)
		u.fail(err)
	}
	return p.writeRecord(kept)
}

func roleOf(d *provider.Desired, pool string) string {
	if d.Model != nil && d.Model.Pools[pool] != nil {
		return d.Model.Pools[pool].Role
	}
	return ""
}

// waitAPIServer waits until the API server on the control-plane host is
// ready; on timeout the error carries the host's kubelet journal.
func (p *Provider) waitAPIServer(ctx context.Context, cfg *rest.Config, cp *Host, timeout time.Duration) error {
	c := rest.CopyConfig(cfg)
	c.Timeout = 5 * time.Second
	kc, err := kubernetes.NewForConfig(c)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var last error
	for {
		_, err := kc.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil {
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			journal := "(unavailable)"
			_ = p.eachHost(context.WithoutCancel(ctx), []*Host{cp}, func(ctx context.Context, c *client) error {
				journal, _ = c.run(ctx, "kubelet's journal", journalErrors("kubelet.service"), nil)
				return nil
			})
			return fmt.Errorf("%s: the API server of its static Pod is not ready after %s (last: %w); kubelet's journal:\n%s", label(cp), timeout, last, journal)
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), last)
		case <-time.After(time.Second):
		}
	}
}

// waitReady waits until the Node is registered and Ready.
func waitReady(ctx context.Context, client kubernetes.Interface, node string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	why := "not registered"
	for {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			why = "registered, not Ready"
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					if c.Status == corev1.ConditionTrue {
						return nil
					}
					why = "not Ready: " + c.Reason + ": " + c.Message
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s %s after %s", node, why, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// pressure names the Node's pressure conditions that hold (disk, memory,
// PIDs), each with the kubelet's message, or "". A Node under one is Ready
// but tainted against new Pods, so a workload meant for it waits unscheduled
// (on these test hosts: the disk they share with the machine that runs them
// fell below the kubelet's eviction threshold).
func pressure(n *corev1.Node) string {
	var held []string
	for _, c := range n.Status.Conditions {
		switch c.Type {
		case corev1.NodeDiskPressure, corev1.NodeMemoryPressure, corev1.NodePIDPressure:
			if c.Status == corev1.ConditionTrue {
				held = append(held, fmt.Sprintf("%s (%s)", c.Type, strings.TrimSuffix(c.Message, ".")))
			}
		}
	}
	if len(held) == 0 {
		return ""
	}
	return "Ready, but under " + strings.Join(held, ", ") + ": no new Pod is scheduled here until it passes (the kubelet's eviction-hard thresholds)"
}

// AfterDeploy implements provider.Provider: it starts each host's
// kubeplug-after-deploy.service (the rendered afterDeploy trigger), which
// runs the afterDeploy hooks; a failed start names the host.
func (p *Provider) AfterDeploy(ctx context.Context) error {
	return p.eachHost(ctx, p.hosts, func(ctx context.Context, c *client) error {
		_, err := c.run(ctx, "afterDeploy", "systemctl start kubeplug-after-deploy.service", nil)
		return err
	})
}

// bootstrapGroup is the group of the cluster's bootstrap tokens.
const bootstrapGroup = "system:bootstrappers:kubeplug:hosts"

// tokenTTL is how long a bootstrap token serves new nodes' first TLS
// bootstrap; later joins get a new one.
const tokenTTL = time.Hour

// tokenSet is the bootstrap token new nodes join with, and the one each node
// was given (kept, so a re-run delivers the same bytes).
type tokenSet struct {
	dir     string
	current string
	byNode  map[string]string
	mu      sync.Mutex
	dirty   bool
}

// tokens reads the state's bootstrap tokens; the current one is new when
// the recorded one is older than tokenTTL (minus a margin for the join).
func (p *Provider) tokens() (*tokenSet, error) {
	ts := &tokenSet{dir: filepath.Join(p.opts.StateDir, "tokens"), byNode: map[string]string{}}
	if err := os.MkdirAll(ts.dir, 0o700); err != nil {
		return nil, err
	}
	cur := filepath.Join(ts.dir, "current")
	if st, err := os.Stat(cur); err == nil && time.Since(st.ModTime()) < tokenTTL-10*time.Minute {
		b, err := os.ReadFile(cur) //nolint:gosec // the state dir
		if err != nil {
			return nil, err
		}
		ts.current = strings.TrimSpace(string(b))
	} else {
		t, err := bootstraptoken.New()
		if err != nil {
			return nil, err
		}
		ts.current, ts.dirty = t, true
		if err := os.WriteFile(cur, []byte(t), 0o600); err != nil {
			return nil, err
		}
	}
	entries, _ := os.ReadDir(ts.dir)
	for _, e := range entries {
		if node, ok := strings.CutSuffix(e.Name(), ".token"); ok {
			b, err := os.ReadFile(filepath.Join(ts.dir, e.Name())) //nolint:gosec // the state dir
			if err != nil {
				return nil, err
			}
			ts.byNode[node] = strings.TrimSpace(string(b))
		}
	}
	return ts, nil
}

// forNode is the token node joins (or joined) with.
func (ts *tokenSet) forNode(node string) string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t := ts.byNode[node]; t != "" {
		return t
	}
	ts.byNode[node] = ts.current
	ts.dirty = true
	return ts.current
}

// save records which token each node was given.
func (ts *tokenSet) save() error {
	for node, t := range ts.byNode {
		if err := os.WriteFile(filepath.Join(ts.dir, node+".token"), []byte(t), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// boot runs the pool's runcmd (which starts the node agent, and through it
// the kubelet) and starts kube-proxy, whose configuration the provider
// delivered.
func (c *client) boot(ctx context.Context, runcmd [][]string) error {
	if err := c.runcmd(ctx, runcmd); err != nil {
		return err
	}
	_, err := c.run(ctx, "start kube-proxy", "systemctl enable --now kube-proxy.service", nil)
	return err
}

// journalErrors is a command printing the last errors of units' journals
// (the kubelet's, klog's E lines, systemd's failures), not their whole
// start-up.
func journalErrors(units ...string) string {
	cmd := "journalctl --no-pager -n 400 -o short"
	for _, u := range units {
		cmd += " -u " + u
	}
	return cmd + ` | grep -E ' E[0-9]{4} |[Ff]ailed|[Ee]rror' | tail -n 12`
}

// waitStaticPods waits until the mirror Pod of each of the control plane's
// static Pods runs with its containers ready, or names those that do not.
func waitStaticPods(ctx context.Context, kc kubernetes.Interface, node string, pods []staticPod, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var waiting []string
		for _, sp := range pods {
			name := sp.pod.Name + "-" + node
			pod, err := kc.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
			switch {
			case err != nil:
				waiting = append(waiting, name+": "+err.Error())
			case !podReady(pod):
				waiting = append(waiting, name+": "+string(pod.Status.Phase))
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("static Pods not ready after %s: %s", timeout, strings.Join(waiting, "; "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// prepareHost is step 1 of Up on one host: preflight, then either a roll
// (the host's delivered list differs from its files now: it is rolled after
// the other hosts are Ready, see rollHost) or delivery of what differs and
// the images. changed says the node must (re)start: files were uploaded or
// its kubelet is not active.
func (p *Provider) prepareHost(ctx context.Context, c *client, cl *cluster, poolFiles, progs []*bootFile, tokens *tokenSet) (changed bool, r *roll, err error) {
	h := c.host
	p.event(h.Node, h.Node, "preflight", false)
	if err := c.preflight(ctx, h.Pool == model.ControlPlanePool); err != nil {
		return false, nil, err
	}
	token := ""
	if h.Pool != model.ControlPlanePool {
		token = tokens.forNode(h.Node)
	}
	own, err := p.nodeFiles(cl, h, token)
	if err != nil {
		return false, nil, err
	}
	files := slices.Concat(poolFiles, progs, own)
	was, err := c.delivered(ctx)
	if err != nil {
		return false, nil, err
	}
	if was != nil {
		if ch, rm := diffDelivered(was, files); len(ch)+len(rm) > 0 {
			p.event(h.Node, h.Node, fmt.Sprintf("%d file(s) changed, %d removed since delivered: rolled after the other hosts", len(ch), len(rm)), false)
			return false, &roll{host: h, files: files, changed: ch, removed: rm}, nil
		}
	}
	began := time.Now()
	n, err := c.deliver(ctx, files, true, func(msg string) { p.event(h.Node, h.Node, msg, false) })
	if err != nil {
		return false, nil, err
	}
	if n > 0 {
		p.event(h.Node, h.Node, fmt.Sprintf("%d of %d files uploaded and verified in %s", n, len(files), time.Since(began).Round(time.Millisecond)), false)
	} else {
		p.event(h.Node, h.Node, fmt.Sprintf("%d files at the rendered state, nothing uploaded", len(files)), false)
	}
	if err := c.pushImages(ctx, cl.images[h.Pool], func(msg string) { p.event(h.Node, h.Node, msg, false) }); err != nil {
		return false, nil, err
	}
	active, _ := c.run(ctx, "kubelet state", "systemctl is-active kubelet.service || true", nil)
	return n > 0 || strings.TrimSpace(active) != "active", nil, nil
}
