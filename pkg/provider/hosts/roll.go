package hosts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// A roll is one host whose delivered files (the list on the host) differ from
// what Up delivers now: its pool's rendered file changed, a node program or
// the provider's part of its boot. Up rolls such hosts one at a time, after
// the others are Ready (see rollHost).
type roll struct {
	host *Host
	// files are the host's files now; changed are the paths whose digest
	// differs from the delivered list (or that are new), removed the paths
	// the list has and files no longer have.
	files            []*bootFile
	changed, removed []string
}

// delivered reads the list of files the provider delivered to the host
// (path → SHA-256); nil when it never delivered to it.
func (c *client) delivered(ctx context.Context) (map[string]string, error) {
	out, err := c.run(ctx, "read the delivered list", "cat "+manifestPath+" 2>/dev/null || true", nil)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(out) == "" {
		return nil, nil
	}
	var was []bootFile
	if err := json.Unmarshal([]byte(out), &was); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", label(c.host), manifestPath, err)
	}
	prev := map[string]string{}
	for _, f := range was {
		prev[f.Path] = f.SHA256
	}
	return prev, nil
}

// diffDelivered compares the files delivered now with the delivered list:
// changed are new paths or paths whose digest differs, removed the listed
// paths no file has any more, both sorted. A file missing or altered on the
// host, with its listed digest unchanged, is neither: delivery puts it back.
func diffDelivered(was map[string]string, files []*bootFile) (changed, removed []string) {
	now := map[string]bool{}
	for _, f := range files {
		now[f.Path] = true
		if sum, ok := was[f.Path]; !ok || sum != f.SHA256 {
			changed = append(changed, f.Path)
		}
	}
	for p := range was {
		if !now[p] {
			removed = append(removed, p)
		}
	}
	slices.Sort(changed)
	slices.Sort(removed)
	return changed, removed
}

// restartedWith are the long-running services a roll restarts when one of
// their files or programs is among the changed paths (the kubelet, through
// the node agent, and kube-proxy restart on every roll).
var restartedWith = map[string][]string{
	"containerd.service": {
		"/usr/local/bin/containerd", "/usr/local/bin/containerd-shim-runc-v2",
		"/etc/systemd/system/containerd.service", "/etc/containerd/",
	},
	"kubeplug-registry.service": {
		"/usr/local/bin/kubeplug-registry", "/etc/systemd/system/kubeplug-registry.service",
	},
}

// restarts are the services of restartedWith whose files changed, sorted.
func restarts(changed []string) []string {
	var out []string
	for unit, files := range restartedWith {
		if slices.ContainsFunc(changed, func(p string) bool {
			return slices.ContainsFunc(files, func(f string) bool {
				return p == f || strings.HasSuffix(f, "/") && strings.HasPrefix(p, f)
			})
		}) {
			out = append(out, unit)
		}
	}
	slices.Sort(out)
	return out
}

// restartRuncmd is runcmd for a host that already runs: each `systemctl
// enable --now <units>` line enables the units and restarts them (path units
// are only started: restarting one would fire its trigger again), so the
// pool's units — the node agent's boot among them, which starts the kubelet —
// run anew from the new files, as on a new machine. A unit's inputs are not
// known (a plugin's unit may read a plugin's file), so all the pool's units
// restart, not only those whose own file changed; the host is drained.
func restartRuncmd(cmds [][]string) [][]string {
	var out [][]string
	for _, argv := range cmds {
		if len(argv) > 3 && argv[0] == "systemctl" && argv[1] == "enable" && argv[2] == "--now" {
			units := argv[3:]
			out = append(out, append([]string{"systemctl", "enable"}, units...))
			var restart, start []string
			for _, u := range units {
				if strings.HasSuffix(u, ".path") {
					start = append(start, u)
				} else {
					restart = append(restart, u)
				}
			}
			if len(restart) > 0 {
				out = append(out, append([]string{"systemctl", "restart"}, restart...))
			}
			if len(start) > 0 {
				out = append(out, append([]string{"systemctl", "start"}, start...))
			}
			continue
		}
		out = append(out, argv)
	}
	return out
}

// removeScript disables the removed units and deletes the removed files.
func removeScript(removed []string) string {
	var b strings.Builder
	b.WriteString("set -e")
	for _, p := range removed {
		if path.Dir(p) == "/etc/systemd/system" {
			fmt.Fprintf(&b, "; systemctl disable --now %s >/dev/null 2>&1 || true", shellQuote(path.Base(p)))
		}
		fmt.Fprintf(&b, "; rm -f %s", shellQuote(p))
	}
	return b.String()
}

// rollHost brings one running host to its new files, as kops rolls a
// machine: cordon and drain its Node (PodDisruptionBudgets hold; bounded by
// the drain timeout, naming the Pods left), stop its kubelet and delete the
// Node so that the kubelet registers it anew with the rendered labels and
// taints (as a replaced machine does), deliver the new files and remove
// those no longer delivered, restart the services whose files or programs
// changed and the pool's units (restartRuncmd), wait until it is Ready (on
// the control-plane host, its API server at the cluster's version with etcd
// healthy), uncordon it. Only then is
// the delivered list written: a roll that failed is rolled again by the next
// run.
func (p *Provider) rollHost(ctx context.Context, kc kubernetes.Interface, c *client, cl *cluster, script *bootScript, r *roll) error {
	h := c.host
	p.event(h.Node, h.Node, fmt.Sprintf("rolling: %d file(s) changed (%s)", len(r.changed), summarize(r.changed)), false)
	_, err := kc.CoreV1().Nodes().Get(ctx, h.Node, metav1.GetOptions{})
	registered := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: %w", label(h), err)
	}
	if registered {
		p.event(h.Node, h.Node, "cordon and drain", false)
		if err := provider.Drain(ctx, kc, h.Node, p.timeouts.drain); err != nil {
			return fmt.Errorf("%s: node %s: %w", label(h), h.Node, err)
		}
	}
	if err := p.stopHost(ctx, kc, c, registered); err != nil {
		return err
	}
	n, err := c.deliver(ctx, r.files, false, func(msg string) { p.event(h.Node, h.Node, msg, false) })
	if err != nil {
		return err
	}
	p.event(h.Node, h.Node, fmt.Sprintf("%d file(s) uploaded and verified", n), false)
	if len(r.removed) > 0 {
		if _, err := c.run(ctx, "remove files no longer delivered", removeScript(r.removed), nil); err != nil {
			return err
		}
	}
	if err := p.restartHost(ctx, c, cl, script, r); err != nil {
		return err
	}
	if err := p.nodeReady(ctx, kc, c, cl); err != nil {
		return err
	}
	if h.Pool == model.ControlPlanePool {
		// The version skew order: the API server of the new version (and its
		// etcd) up before any kubelet moves.
		if err := p.waitAPIVersion(ctx, kc, h); err != nil {
			return err
		}
	}
	if err := provider.Cordon(ctx, kc, h.Node, false); err != nil {
		return fmt.Errorf("%s: node %s: %w", label(h), h.Node, err)
	}
	if err := c.writeDelivered(ctx, r.files); err != nil {
		return err
	}
	p.event(h.Node, h.Node, "rolled, Ready", true)
	return nil
}

// stopHost stops the kubelet and kube-proxy of a drained host and deletes its
// Node (when it was registered), before the new files are delivered: the
// kubelet would start a control-plane host's new static Pods as soon as
// their manifests changed, before their images are in the host's registry,
// and the API server that deletes the Node is that host's own. A stopped
// kubelet leaves the static Pods' containers running, the old API server
// among them, until the kubelet starts from the new files.
func (p *Provider) stopHost(ctx context.Context, kc kubernetes.Interface, c *client, registered bool) error {
	h := c.host
	if _, err := c.run(ctx, "stop the kubelet", "systemctl stop kubelet.service kube-proxy.service", nil); err != nil {
		return err
	}
	if registered {
		if err := kc.CoreV1().Nodes().Delete(ctx, h.Node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: delete node %s before its kubelet registers it anew: %w", label(h), h.Node, err)
		}
	}
	return nil
}

// restartHost is step 4–5 of rollHost, on a host whose kubelet stopHost
// stopped and whose new files are delivered: restart what changed, push the
// images, restart the pool's units (the kubelet through the node agent's
// boot) and start kube-proxy.
func (p *Provider) restartHost(ctx context.Context, c *client, cl *cluster, script *bootScript, r *roll) error {
	h := c.host
	restart := "systemctl daemon-reload"
	if rs := restarts(r.changed); len(rs) > 0 {
		p.event(h.Node, h.Node, "restarting "+strings.Join(rs, ", "), false)
		restart += " && systemctl restart " + strings.Join(rs, " ")
	}
	if _, err := c.run(ctx, "restart what changed", restart, nil); err != nil {
		return err
	}
	if err := c.pushImages(ctx, cl.images[h.Pool], func(msg string) { p.event(h.Node, h.Node, msg, false) }); err != nil {
		return err
	}
	p.event(h.Node, h.Node, "restarting the pool's units and the kubelet", false)
	// boot starts kube-proxy, stopped above, from its new files.
	return c.boot(ctx, restartRuncmd(script.Runcmd))
}

// nodeReady waits until the host's Node is Ready (naming the host, with its
// kubelet's journal, when it is not in time); on the control-plane host also
// its static Pods, and it labels and taints the Node as the control plane's.
func (p *Provider) nodeReady(ctx context.Context, kc kubernetes.Interface, c *client, cl *cluster) error {
	h := c.host
	if err := waitReady(ctx, kc, h.Node, p.timeouts.ready); err != nil {
		journal, _ := c.run(context.WithoutCancel(ctx), "kubelet's journal", journalErrors("kubelet.service", "kubeplug-boot.service"), nil)
		return fmt.Errorf("%s: %w; kubelet's journal:\n%s", label(h), err, journal)
	}
	if h.Pool == model.ControlPlanePool {
		if err := waitStaticPods(ctx, kc, h.Node, cl.cpPods, p.timeouts.ready); err != nil {
			return fmt.Errorf("%s: %w", label(h), err)
		}
		patch := []byte(`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}},"spec":{"taints":[{"key":"node-role.kubernetes.io/control-plane","effect":"NoSchedule"}]}}`)
		if _, err := kc.CoreV1().Nodes().Patch(ctx, h.Node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("%s: label the control-plane Node: %w", label(h), err)
		}
	}
	// Read last: the kubelet reports pressure only after its first eviction
	// check, which may come after Ready.
	if n, err := kc.CoreV1().Nodes().Get(ctx, h.Node, metav1.GetOptions{}); err == nil {
		if msg := pressure(n); msg != "" {
			p.event(h.Node, h.Node, msg, false)
		}
	}
	return nil
}

// rollAll rolls the hosts of rolls one at a time, the control-plane host
// first, then the others in host order (rollOrder). The first that fails stops the roll: the error
// names it and the hosts not rolled yet, which keep their old files; a re-run
// rolls them (and the failed one again).
func (p *Provider) rollAll(ctx context.Context, kc kubernetes.Interface, cl *cluster, scripts map[string]*bootScript, rolls map[string]*roll) error {
	order := rollOrder(p.hosts, rolls)
	for i, r := range order {
		began := time.Now()
		err := p.eachHost(ctx, []*Host{r.host}, func(ctx context.Context, c *client) error {
			return p.rollHost(ctx, kc, c, cl, scripts[r.host.Pool], r)
		})
		if err != nil {
			var left []string
			for _, o := range order[i+1:] {
				left = append(left, o.host.Address)
			}
			msg := "the roll stopped at this host"
			if len(left) > 0 {
				msg += "; not rolled, on their old files: " + strings.Join(left, ", ")
			}
			return &HostError{Failed: map[string]error{r.host.Address: fmt.Errorf("%w (%s; `kubeplug up` again rolls on)", failedOf(err, r.host), msg)}}
		}
		p.opts.Logger.Info("rolled", "node", r.host.Node, "took", time.Since(began))
	}
	return nil
}

// rollOrder is the order hosts are rolled in: the control-plane host first
// (Kubernetes' version skew policy: the API server moves before the kubelets
// it serves), then the workers in host order.
func rollOrder(hosts []*Host, rolls map[string]*roll) []*roll {
	var order []*roll
	for _, cp := range []bool{true, false} {
		for _, h := range hosts {
			if r := rolls[h.Node]; r != nil && (h.Pool == model.ControlPlanePool) == cp {
				order = append(order, r)
			}
		}
	}
	return order
}

// failedOf is host's error out of eachHost's *HostError.
func failedOf(err error, h *Host) error {
	var he *HostError
	if errors.As(err, &he) && he.Failed[h.Address] != nil {
		return he.Failed[h.Address]
	}
	return err
}

// summarize lists paths, the first few.
func summarize(paths []string) string {
	if len(paths) > 4 {
		return strings.Join(paths[:4], ", ") + fmt.Sprintf(", … %d more", len(paths)-4)
	}
	return strings.Join(paths, ", ")
}
