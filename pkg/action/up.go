package action

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/render"
	"github.com/kubeplug/kubeplug/pkg/stage"
	"github.com/kubeplug/kubeplug/pkg/values"
)

// Up brings a whole cluster to its spec: the provider spec.provider names (local
// by default) brings the control plane (with the flags, feature gates and volumes
// plugins contributed) and the node pools (their machines run the plugins' hooks
// and receive their files and units), then every plugin's Kubernetes content is
// deployed in dependency order, the machines run their after-deploy hooks, and every
// plugin's checks validate the result. Up on a running cluster applies the
// difference.
type Up struct {
	cfg *Config
	// DeployOptions say how the plugins' content is deployed, as for Apply.
	DeployOptions
	// StateDir is where the provider keeps the cluster's state, for providers that
	// keep it on this machine. Default: the provider's (the local provider's is
	// local.DefaultStateDir(name)).
	StateDir string
	// ProviderEvents receives the provider's progress.
	ProviderEvents func(provider.Event)
	// ProviderOptions are settings of the cluster's provider given beside its
	// spec (provider.Config.Options): --build-from-source.
	ProviderOptions []provider.Option
}

// NewUp returns an Up action.
func NewUp(cfg *Config) *Up { return &Up{cfg: cfg} }

// UpResult summarises an up.
type UpResult struct {
	*ApplyResult
	Cluster    string `json:"cluster"`
	StateDir   string `json:"stateDir"`
	Kubeconfig string `json:"kubeconfig"`
	// Context is the context added to the user's kubeconfig, when one was.
	Context   string                `json:"context,omitempty"`
	Nodes     []provider.NodeStatus `json:"nodes,omitempty"`
	Restarted []string              `json:"restarted,omitempty"`
	// Versions are the plugins' versions, by name.
	Versions map[string]string `json:"versions"`
	// LessTested are the plugins of the contrib directory, tested less than
	// the built-in ones, sorted.
	LessTested []string `json:"lessTested,omitempty"`
	// Contributed counts, per plugin, the constructs it contributed by kind.
	Contributed map[string]map[string]int `json:"contributed"`
	// Ready is the time from the start of up until the validate stage passed.
	Ready time.Duration `json:"ready"`
	// Deployed is what the provider deployed to a cloud (the aws provider's
	// stacks with their outputs, the uploaded files); nil for the others.
	Deployed *model.Deployed `json:"deployed,omitempty"`
}

// Run brings cl up: provider, resolve, initialise, render, provision, connect,
// deploy, after-deploy, cluster-ready, validate, record. On a provider that deploys the machines
// but does not reach their API server (provider.Running without a RESTConfig: the
// aws provider), it ends after provision with the plugins' validate stage, which
// sees what the provider deployed (model.Model.Deployed), and a warning. The result is nil when the provider
// refused the cluster or the plugins did not resolve.
func (u *Up) Run(ctx context.Context, cl *config.Cluster) (*UpResult, diag.List) {
	start := time.Now()
	res := &UpResult{Versions: map[string]string{}, Contributed: map[string]map[string]int{}}
	r := u.cfg.newRun(cl, false)
	defer r.close()
	// Losing the operation lease cancels the whole run: another may have started.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.live = live{op: "up", opts: u.DeployOptions, cancel: cancel}
	defer r.live.unlockLease()
	unlock := func() {}
	defer func() { unlock() }()
	l := r.pipeline(ctx, u.providerStep(res), u.lockStep(&unlock), factsStep, resolveStep)
	if l.HasFatal() {
		return nil, l
	}
	res.ApplyResult = &ApplyResult{Plugins: r.plan.Names()}
	r.live.res = res.ApplyResult
	l = append(l, r.pipeline(ctx, stageStep(stage.Initialise), stageStep(stage.Render), u.provisionStep(res))...)
	switch {
	case l.HasFatal():
	case r.running.RESTConfig == nil:
		// The provider deployed the machines and cannot reach their API server
		// (the aws provider, whose API server it does not reach): the plugins' validate stage
		// still sees what it deployed; nothing that needs the cluster runs.
		l = append(l, r.pipeline(ctx, stageStep(stage.Validate))...)
		l.Warnf("", 0, 0, "", "the %s provider deployed the cluster's cloud resources and its machines' boot secrets, which they fetch at boot; kubeplug does not wait for the machines nor reach their API server, so no plugin's Kubernetes content was deployed and no live check ran (docs/aws.md)", providerName(cl))
	default:
		l = append(l, r.pipeline(ctx, connectStep, deployStep, afterDeployStep, clusterReadyStep, validateStep, recordStep)...)
	}
	l.Sort()
	if r.live.blocked {
		// Another run holds the cluster: no verdict on its readiness.
		return nil, l
	}
	res.Duration = time.Since(start).Round(time.Millisecond)
	res.Ready = time.Since(start).Round(100 * time.Millisecond)
	return res, l
}

// lockStep takes the cluster's lock on this machine (provider.Locker) for the
// whole run, waiting up to --lock-timeout (Lease.Wait) while another run holds
// it, as apply waits for the operation lease: a second up waits for the first
// instead of failing at once. Input: r.prov. Output: *unlock frees the lock.
// A run that could not take it is blocked: it has no readiness verdict.
func (u *Up) lockStep(unlock *func()) step {
	return step{stepLock, func(ctx context.Context, r *run) diag.List {
		var l diag.List
		lk, ok := r.prov.(provider.Locker)
		if !ok || u.Lease.External {
			return nil
		}
		var waited bool
		free, err := lk.Lock(ctx, "up", u.Lease.Wait, func(holder, op string, w time.Duration) {
			waited = true
			if u.Events != nil {
				u.Events(deploy.Event{Type: deploy.LeaseWaiting, Time: time.Now(), Holder: holder, Operation: op,
					Message: fmt.Sprintf("waited %s of up to %s (--lock-timeout)", w.Round(time.Second), u.Lease.Wait)})
			}
		})
		if err != nil {
			r.live.blocked = errors.Is(err, provider.ErrBusy)
			if ctx.Err() != nil {
				l.Errorf("", 0, 0, "", "interrupted while waiting for another kubeplug to finish with cluster %s; nothing was changed", r.cluster.Spec.Metadata.Name)
				return l
			}
			l.Errorf("", 0, 0, "", "%v", err)
			return l
		}
		if waited && u.Events != nil {
			u.Events(deploy.Event{Type: deploy.LeaseTaken, Time: time.Now(), Operation: "up", Message: "took the cluster's lock"})
		}
		*unlock = free
		return l
	}}
}

// providerStep chooses the cluster's provider from the registry by
// spec.provider, before anything resolves: the provider may refuse the cluster's
// Kubernetes version (provider.VersionChecker). Input: the cluster spec.
// Output: r.prov; the cluster and its state directory in res.
func (u *Up) providerStep(res *UpResult) step {
	return step{stepProvider, func(_ context.Context, r *run) diag.List {
		var l diag.List
		cl := r.cluster
		res.Cluster = cl.Spec.Metadata.Name
		prov, err := provider.New(provider.Config{ClusterName: res.Cluster, Spec: cl.Spec.Spec.Provider, StateDir: u.StateDir, Events: u.ProviderEvents, Logger: r.log(), Options: u.ProviderOptions})
		if err != nil {
			cl.Errorf(&l, "/spec/provider", "%v", err)
			return l
		}
		if s, ok := prov.(provider.Stateful); ok {
			res.StateDir = s.StateDir()
		}
		if vc, ok := prov.(provider.VersionChecker); ok {
			if err := vc.CheckKubernetesVersion(cl.KubernetesVersion.String()); err != nil {
				cl.Errorf(&l, "/spec/kubernetesVersion", "%v", err)
				return l
			}
		}
		r.prov = prov
		return l
	}}
}

// factsStep gives a provider whose control plane runs with the control-plane
// plugin's flags (provider.FactSource) its machine facts in that plugin's
// values, so that render shows what the provider runs. It runs under the
// cluster's lock (lockStep): facts asked for while another up starts the
// cluster would name ports of their own, not the ones it then runs on.
// Input: r.prov. Output: the spec's control-plane plugin values completed.
var factsStep = step{stepFacts, func(_ context.Context, r *run) diag.List {
	return machineFacts(r.cluster, r.prov, true)
}}

// CorePlugin is the built-in plugin the control plane's flags come from.
const CorePlugin = "control-plane"

// CloudPlugin is the built-in plugin whose values the cloud template is built
// from (render.Input.CloudValues); a cluster that does not enable it gets its
// defaults.
const CloudPlugin = "cloud"

// machineFacts sets the control-plane plugin's "machine" value to the facts
// of prov, when it is a provider.FactSource (address, ports, certificate
// paths), so that its flags and the static Pods rendered from them are the
// command lines the provider runs. It is the one source of those facts for
// every run on a cluster such a provider runs — up, and apply, uninstall and
// rollback on the cluster file's own cluster — so that they render the same
// flags and record the same values: a run that left them at the plugin's
// defaults would record a "values changed" revision and make uninstall -f and
// rollback -f refuse to reconcile the machines. With required (up, which has no
// other source of the control plane's flags), a cluster spec that does not
// enable the plugin is refused; otherwise it is left as it is.
func machineFacts(cl *config.Cluster, p provider.Provider, required bool) diag.List {
	var l diag.List
	prov, ok := p.(provider.FactSource)
	if !ok {
		return l
	}
	i := slices.IndexFunc(cl.Enabled(), func(r v1alpha1.PluginRef) bool { return r.Name == CorePlugin })
	if i < 0 {
		if required {
			cl.Errorf(&l, "/spec/plugins", "the %s provider runs the control plane with the flags of the built-in %s plugin: enable it (spec.plugins.enabled: [{name: %s}])", providerName(cl), CorePlugin, CorePlugin)
		}
		return l
	}
	facts, err := prov.Facts()
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return l
	}
	return setMachineFacts(cl, i, facts)
}

// specFacts sets the control-plane plugin's "machine" value for render to the
// facts of a provider whose facts follow from the cluster file alone
// (provider.SpecRender: the aws provider's), so that render shows the
// static Pods its machines run. A cluster that does not enable the plugin, or
// whose provider registered none, is left as it is.
func specFacts(cl *config.Cluster) diag.List {
	sr := provider.SpecRenderOf(cl.Spec.Spec.Provider)
	i := slices.IndexFunc(cl.Enabled(), func(r v1alpha1.PluginRef) bool { return r.Name == CorePlugin })
	if sr.Facts == nil || i < 0 {
		return nil
	}
	return setMachineFacts(cl, i, sr.Facts(cl.Spec.Spec.Provider))
}

// setMachineFacts sets facts as the "machine" value of the i-th enabled
// plugin (the control-plane plugin).
func setMachineFacts(cl *config.Cluster, i int, facts map[string]any) diag.List {
	var l diag.List
	// As decoded from a file, so that the values schema sees JSON numbers.
	b, err := json.Marshal(facts)
	var machine map[string]any
	if err == nil {
		err = json.Unmarshal(b, &machine)
	}
	if err != nil {
		l.Errorf("", 0, 0, "", "encode the machine facts: %v", err)
		return l
	}
	ref := &cl.Spec.Spec.Plugins.Enabled[i]
	ref.Values = maps.Clone(ref.Values)
	if ref.Values == nil {
		ref.Values = v1alpha1.Values{}
	}
	ref.Values["machine"] = machine
	return l
}

// providerName names the provider cl selects, for messages.
func providerName(cl *config.Cluster) string {
	name, err := provider.NameOf(cl.Spec.Spec.Provider)
	if err != nil {
		return "cluster's"
	}
	return name
}

// provisionStep has the cluster's provider bring the control plane and the
// machines to the rendered state. Input: r.prov, r.model (finished by render).
// Output: r.running and r.live.rest; the nodes and what the plugins contributed
// in res.
func (u *Up) provisionStep(res *UpResult) step {
	return step{stepProvision, func(ctx context.Context, r *run) diag.List {
		var l diag.List
		doc := r.plan.Doc(r.model)
		res.LessTested = nil
		for _, pl := range doc.Plugins {
			res.Versions[pl.Name] = pl.Version
			if pl.LessTested {
				res.LessTested = append(res.LessTested, pl.Name)
			}
		}
		slices.Sort(res.LessTested)
		for _, c := range doc.Contributions {
			if res.Contributed[c.Plugin] == nil {
				res.Contributed[c.Plugin] = map[string]int{}
			}
			res.Contributed[c.Plugin][c.Kind]++
		}
		prov := r.prov
		in := r.renderInput()
		machines, ml := render.Machines(ctx, in)
		l = append(l, r.plan.LocatePatches(r.model, ml)...)
		if ml.HasFatal() {
			return l
		}
		var files map[string][]byte
		if fd, ok := prov.(provider.FileDeployer); ok && fd.DeploysFiles() {
			var fl diag.List
			files, fl = render.Files(ctx, in)
			if l = append(l, r.plan.LocatePatches(r.model, fl)...); fl.HasFatal() {
				return l
			}
		}
		sensitive := map[string][]string{}
		for _, pl := range r.plan.Plugins {
			if pl.Values == nil {
				continue
			}
			vs := values.SensitiveValues(pl.Values.Cluster, pl.Values.Sensitive)
			for _, pv := range pl.Values.Pools {
				vs = append(vs, values.SensitiveValues(pv, pl.Values.Sensitive)...)
			}
			if len(vs) > 0 {
				sensitive[pl.Package.Name] = vs
			}
		}
		skip := r.providerSkips()
		for _, name := range slices.Sorted(maps.Keys(skip)) {
			l.Warnf("", 0, 0, "", "step %s%s of the %s provider skipped: expansion %s says the site provides it (skipSteps)", provider.StepPrefix, name, providerName(r.cluster), skip[name])
		}
		running, err := prov.Up(ctx, &provider.Desired{ClusterName: res.Cluster, KubernetesVersion: in.KubernetesVersion, Model: r.model, Machines: machines, Files: files, Sensitive: sensitive, Skip: skip, Site: r.site()})
		if running != nil {
			// Valid with a node's failure too: the control plane runs.
			res.Kubeconfig, res.Nodes, res.Restarted = running.Kubeconfig, running.Nodes, running.Restarted
			res.Deployed, r.model.Deployed = running.Deployed, running.Deployed
		}
		if err != nil {
			if ctx.Err() != nil {
				// One line: what was being waited for when Ctrl-C came is
				// debugging detail (-vv), not news.
				r.log().Debug("bringing the cluster up was interrupted", "error", err)
				l.Errorf("", 0, 0, "", "interrupted while bringing the cluster up; run kubeplug up again to continue")
				return l
			}
			l.Errorf("", 0, 0, "", "bring the cluster up: %v", err)
			return l
		}
		r.running, r.live.rest = running, running.RESTConfig
		return l
	}}
}

// afterDeployStep has the provider run the machines' afterDeploy hooks, once every
// wave is deployed and ready. Input: r.prov. Output: none.
var afterDeployStep = step{stepAfterDeploy, func(ctx context.Context, r *run) diag.List {
	var l diag.List
	if err := r.prov.AfterDeploy(ctx); err != nil {
		l.Errorf("", 0, 0, "", "after deploy: %v", err)
	}
	return l
}}
