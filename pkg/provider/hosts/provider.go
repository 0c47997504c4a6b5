package hosts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// Name is the provider's name in the registry and in spec.provider.
const Name = "hosts"

// AcceptNewHostKeys is the provider.Option of `up --accept-new-host-keys`:
// a host whose key is not in the known_hosts file has it added (never a
// changed one).
type AcceptNewHostKeys struct{}

// Provider implements provider.Option.
func (AcceptNewHostKeys) Provider() string { return Name }

func (AcceptNewHostKeys) String() string { return "--accept-new-host-keys" }

// defineFlags defines up's flag of the hosts provider.
func defineFlags(fs *pflag.FlagSet, opts *[]provider.Option) func(bool) error {
	provider.BoolOptionVar(fs, opts, AcceptNewHostKeys{}, "accept-new-host-keys", "hosts provider: add the key of a host not in the known_hosts file to it (a changed key is always refused)")
	provider.BoolOptionVar(fs, opts, ForgetRemovedHosts{}, "forget-removed-hosts", "hosts provider: forget a host removed from the file that cannot be reached (its Node is deleted, its files stay on it)")
	defineKubernetesBinFlag(fs, opts)
	return nil
}

func init() {
	provider.RegisterFlags(defineFlags)
	// The control plane runs with the control-plane plugin's flags on the
	// control-plane host; every host gets the bridge CNI configuration.
	provider.RegisterFacts(Name, func(_ *v1alpha1.Cluster, values func(string) map[string]any, f *stage.Facts) {
		f.APIEndpoint = provider.ControlPlaneEndpoint(values)
		f.CNI = "bridge"
		f.NodeRoles[model.RoleControlPlane] = "node-role.kubernetes.io/control-plane"
	})
	// The hosts are the pools' machines: a pool does not scale.
	config.RegisterProviderCheck(Name, checkSpec)
	provider.Register(Name, func(cfg provider.Config) (provider.Provider, error) {
		opts := Options{ClusterName: cfg.ClusterName, StateDir: cfg.StateDir, Events: cfg.Events, Logger: cfg.Logger}
		if cfg.Spec != nil {
			opts.Spec = cfg.Spec.Hosts
		}
		for _, o := range cfg.Options {
			switch o := o.(type) {
			case AcceptNewHostKeys:
				opts.AcceptNewHostKeys = true
			case ForgetRemovedHosts:
				opts.ForgetRemovedHosts = true
			case ManagementClient:
				opts.Management = o.Client
			case KubernetesBin:
				opts.Programs.KubernetesBins = append(opts.Programs.KubernetesBins, o.Dir)
			}
		}
		return New(opts)
	})
}

// Options configure the hosts provider.
type Options struct {
	ClusterName string
	// StateDir keeps the cluster's PKI, the nodes' identities and the
	// cluster-admin kubeconfig. Default $XDG_STATE_HOME/kubeplug/clusters/<name>
	// (~/.local/state/... without it), as the local provider's.
	StateDir string
	// Spec is cluster.yaml's spec.provider.hosts.
	Spec *v1alpha1.HostsProvider
	// AcceptNewHostKeys adds unknown host keys to the known_hosts file.
	AcceptNewHostKeys bool
	// ForgetRemovedHosts forgets a host removed from the spec that cannot
	// be reached (its Node deleted, its files left on it).
	ForgetRemovedHosts bool
	// Management is the management cluster's client (the controller's),
	// through which keySecretRef Secrets are read; nil for the CLI, which
	// then refuses keySecretRef.
	Management kubernetes.Interface
	// Parallel bounds how many hosts are worked on at once. Default 8.
	Parallel int
	// Programs are the node programs the hosts get.
	Programs Programs
	// Events receives progress; default none.
	Events func(provider.Event)
	// Logger receives diagnostics; default discards.
	Logger *slog.Logger
}

// Provider builds a cluster on existing hosts over SSH.
type Provider struct {
	opts     Options
	hosts    []*Host
	keys     *hostKeys
	timeouts timeouts
	// version is the Kubernetes version whose programs the hosts get, once
	// selectVersion chose them; movedFrom the version the cluster ran
	// before, when this run moves it.
	version, movedFrom string
}

// New checks opts (every error names its field of cluster.yaml) and connects
// to nothing.
func New(opts Options) (*Provider, error) {
	hosts, t, probs := resolveHosts(opts.Spec, true)
	if err := problemsErr(probs); err != nil {
		return nil, err
	}
	if opts.Management == nil {
		if f := secretRefField(opts.Spec); f != "" {
			return nil, fmt.Errorf("%s: the key is in a Secret of a management cluster, read through its client (the hosts.ManagementClient option); the CLI has none: set keyFile or agent: true", f)
		}
	}
	file, err := knownHostsFile(opts.Spec)
	if err != nil {
		return nil, err
	}
	if opts.StateDir == "" {
		base := os.Getenv("XDG_STATE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, fmt.Errorf("default state directory: %w", err)
			}
			base = filepath.Join(home, ".local", "state")
		}
		opts.StateDir = filepath.Join(base, "kubeplug", "clusters", opts.ClusterName)
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 8
	}
	if opts.Events == nil {
		opts.Events = func(provider.Event) {}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Provider{opts: opts, hosts: hosts, keys: &hostKeys{file: file, acceptNew: opts.AcceptNewHostKeys}, timeouts: t}, nil
}

func (p *Provider) event(node, item, msg string, done bool) {
	p.opts.Events(provider.Event{Time: time.Now(), Step: "node", Node: node, Item: item, Message: msg, Done: done})
	p.opts.Logger.Info("progress", "node", node, "message", msg)
}

// HostError is what failed on some hosts while the others went on.
type HostError struct {
	// Failed maps a host's address to its error.
	Failed map[string]error
}

func (e *HostError) Error() string {
	addrs := slices.Sorted(func(yield func(string) bool) {
		for a := range e.Failed {
			if !yield(a) {
				return
			}
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%d host(s) failed: %s", len(addrs), strings.Join(addrs, ", "))
	for _, a := range addrs {
		b.WriteString("\n  " + e.Failed[a].Error())
	}
	return b.String()
}

// Unwrap gives errors.Is/As each host's error.
func (e *HostError) Unwrap() []error {
	var out []error
	for _, err := range e.Failed {
		out = append(out, err)
	}
	return out
}

// eachHost runs fn on every host of hosts, at most Parallel at once, each
// with its own connection. A host that fails does not stop the others; the
// error is a *HostError naming every failed host.
func (p *Provider) eachHost(ctx context.Context, hosts []*Host, fn func(ctx context.Context, c *client) error) error {
	if err := p.secretKeys(ctx, hosts); err != nil {
		return err
	}
	sem := make(chan struct{}, p.opts.Parallel)
	var mu sync.Mutex
	failed := map[string]error{}
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				mu.Lock()
				failed[h.Address] = fmt.Errorf("%s: %w", label(h), context.Cause(ctx))
				mu.Unlock()
				return
			}
			defer func() { <-sem }()
			err := func() error {
				p.event(h.Node, h.Node, "connecting to "+h.Addr(), false)
				c, err := dial(ctx, h, p.keys)
				if err != nil {
					return err
				}
				defer c.Close()
				return fn(ctx, c)
			}()
			if err != nil {
				p.event(h.Node, h.Node, "failed: "+err.Error(), true)
				mu.Lock()
				failed[h.Address] = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		return &HostError{Failed: failed}
	}
	return nil
}

var _ provider.FileDeployer = (*Provider)(nil)

// DeploysFiles implements provider.FileDeployer: the hosts get their pools'
// rendered boot files.
func (p *Provider) DeploysFiles() bool { return true }

// plan is, per pool, what its hosts get.
func (p *Provider) plan(d *provider.Desired) (map[string]*bootScript, []*bootFile, error) {
	var errs []error
	listed := map[string]int{}
	for _, h := range p.hosts {
		listed[h.Pool]++
	}
	if d.Model != nil {
		for _, name := range slices.Sorted(mapKeys(d.Model.Pools)) {
			pool := d.Model.Pools[name]
			switch n := listed[name]; {
			case n == 0:
				errs = append(errs, fmt.Errorf("%s.pools: node pool %s (%d nodes) has no hosts: list them", field, name, pool.Count))
			case n != pool.Count:
				errs = append(errs, fmt.Errorf("%s.pools: node pool %s has count %d and %d hosts: they must be equal", field, name, pool.Count, n))
			}
		}
		for name := range listed {
			if d.Model.Pools[name] == nil {
				errs = append(errs, fmt.Errorf("%s.pools: %s is not a node pool of spec.nodePools", field, name))
			}
		}
	}
	scripts := map[string]*bootScript{}
	for name := range listed {
		file := "nodes/" + name + "/cloud-init.yaml"
		b, ok := d.Files[file]
		if !ok {
			errs = append(errs, fmt.Errorf("pool %s: no rendered %s to deliver to its hosts", name, file))
			continue
		}
		s, err := parseCloudConfig(file, b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		scripts[name] = s
	}
	progs, err := programFiles(p.opts.Programs)
	if err != nil {
		errs = append(errs, err)
	}
	if err := checkSite(d); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	return scripts, progs, nil
}

// Down implements provider.Provider: on every host — those of the spec and
// those removed from it that a run could not clean yet — it stops kubeplug's
// units and removes every file it delivered (the list on the host), its
// links and its state. The OS is left as it was; the provider installs no
// package.
func (p *Provider) Down(ctx context.Context, _ bool) error {
	removed, err := p.removedHosts()
	if err != nil {
		return err
	}
	err = p.eachHost(ctx, slices.Concat(p.hosts, removed), func(ctx context.Context, c *client) error {
		p.event(c.host.Node, c.host.Node, "removing kubeplug's files and units", false)
		if err := c.clean(ctx); err != nil {
			return err
		}
		p.event(c.host.Node, c.host.Node, "clean", true)
		return nil
	})
	if err == nil && len(removed) > 0 {
		if _, serr := os.Stat(p.opts.StateDir); serr == nil {
			err = p.writeRecord(nil)
		}
	}
	if err == nil {
		// The hosts run no Kubernetes any more: any version may come up.
		err = p.forgetVersion()
	}
	return err
}

// SetProgramsForTest sets the node programs the hosts get (Options.Programs)
// of a provider made by the registry.
func (p *Provider) SetProgramsForTest(progs Programs) { p.opts.Programs = progs }
