package action

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplug/kubeplug/internal/faultpoint"
	"github.com/kubeplug/kubeplug/pkg/check"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/render"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// Cluster says which running cluster to talk to, as kubectl does.
type Cluster struct {
	// Kubeconfig is a kubeconfig file; empty means $KUBECONFIG or ~/.kube/config.
	Kubeconfig string
	// Context is a context in it; empty means its current context.
	Context string
	// RESTConfig, when set, is used instead of the kubeconfig (library users, tests).
	RESTConfig *rest.Config
}

// Config returns the REST config of the cluster.
func (c *Cluster) Config() (*rest.Config, error) {
	if c.RESTConfig != nil {
		return rest.CopyConfig(c.RESTConfig), nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context})
	if c.Context != "" {
		// Name the file and the contexts it has: clientcmd's own message names neither.
		if raw, err := loader.RawConfig(); err == nil && raw.Contexts[c.Context] == nil {
			files := rules.GetLoadingPrecedence()
			if rules.ExplicitPath != "" {
				files = []string{rules.ExplicitPath}
			}
			return nil, fmt.Errorf("the kubeconfig (%s) has no context %q; it has: %s",
				strings.Join(files, string(filepath.ListSeparator)), c.Context, strings.Join(slices.Sorted(maps.Keys(raw.Contexts)), ", "))
		}
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}

// Apply runs every stage of a cluster file against a running cluster: it deploys
// each wave's Kubernetes content, waits until it is ready before the next wave,
// prunes what plugins no longer produce and uninstalls plugins the file no longer
// enables.
type Apply struct {
	cfg     *Config
	Cluster Cluster
	// DryRun asks the API server to validate everything without persisting it.
	DryRun bool
	// Timeout bounds how long each plugin may take to become ready. Default 5m.
	Timeout time.Duration
	// ForceConflicts takes over fields other field managers own.
	ForceConflicts bool
	// ForceCRDChanges applies CustomResourceDefinition changes that would break
	// existing objects or clients, which are otherwise refused.
	ForceCRDChanges bool
	// RollbackOnFailure restores the previous revision of a plugin whose objects do
	// not become ready (its Helm releases too), or uninstalls it when it was new.
	RollbackOnFailure bool
	// AllowDowngrade applies plugin versions lower than the installed ones.
	AllowDowngrade bool
	// HistoryMax bounds the revisions recorded per plugin. Default 10.
	HistoryMax int
	// Lease says how the run takes the cluster's operation lease (not in a dry run).
	Lease Lease
	// Events receives progress.
	Events func(deploy.Event)
}

// NewApply returns an Apply action.
func NewApply(cfg *Config) *Apply { return &Apply{cfg: cfg} }

// ApplyResult summarises an apply.
type ApplyResult struct {
	Plugins   []string      `json:"plugins"`
	Applied   int           `json:"applied"`
	Pruned    int           `json:"pruned"`
	Removed   []string      `json:"removed,omitempty"`
	Duration  time.Duration `json:"duration"`
	DryRun    bool          `json:"dryRun,omitempty"`
	Validated bool          `json:"validated"`
	// Checks are the plugins' validate checks, in wave order (none in a dry run).
	Checks []check.Result `json:"checks,omitempty"`
}

// Run applies the cluster file at path.
func (a *Apply) Run(ctx context.Context, path string) (*ApplyResult, diag.List) {
	return a.run(ctx, path, lifecycle{})
}

// lifecycle lets a caller that owns the cluster (kubeplug up) bring it to the
// rendered state before the first wave is deployed, and run the machines' after-deploy
// work once every wave is.
type lifecycle struct {
	// loaded, when set, runs with the loaded cluster file before anything is
	// resolved; a fatal diagnostic stops the run.
	loaded func(ctx context.Context, cl *config.Cluster) diag.List
	// bringUp runs once, with the finished model, before the first wave; it returns
	// the cluster's REST config.
	bringUp func(ctx context.Context, p *prepared, m *model.Model) (*rest.Config, diag.List)
	// afterDeploy runs after the last wave is deployed and ready.
	afterDeploy func(ctx context.Context) diag.List
}

func (a *Apply) run(ctx context.Context, path string, lc lifecycle) (*ApplyResult, diag.List) {
	start := time.Now()
	p, l := a.cfg.prepareWith(ctx, path, false, lc.loaded)
	if p == nil {
		return nil, l
	}
	defer p.close()
	// Losing the operation lease cancels the whole run: another may have started.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	unlock := func() {}
	defer func() { unlock() }()
	var d *deploy.Deployer
	connect := func(ctx context.Context) error {
		var err error
		if d, err = a.deployer(); err != nil {
			return err
		}
		if err := d.Ping(ctx); err != nil {
			return fmt.Errorf("cannot reach the cluster: %w", err)
		}
		if a.DryRun {
			return nil
		}
		op := "apply"
		if lc.bringUp != nil {
			op = "up"
		}
		lctx, u, err := a.Lease.lock(ctx, d, op, a.cfg.logger())
		if err != nil {
			return err
		}
		unlock = u
		context.AfterFunc(lctx, func() { cancel(context.Cause(lctx)) })
		return nil
	}
	// A refused downgrade stops the apply before any wave changes anything.
	downgrades := func(ctx context.Context) diag.List {
		versions := map[string]string{}
		for _, pl := range p.plan.Plugins {
			versions[pl.Package.Name] = pl.Package.Version.String()
		}
		var dl diag.List
		err := d.CheckDowngrades(ctx, versions)
		errs := []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = j.Unwrap()
		}
		for _, e := range errs {
			if e != nil {
				dl.Errorf("", 0, 0, "", "%v", e)
			}
		}
		return dl
	}
	if lc.bringUp == nil {
		// Fail before rendering anything when the cluster cannot be reached.
		if err := connect(ctx); err != nil {
			l.Errorf("", 0, 0, "", "%v", err)
			return nil, l
		}
		if l = append(l, downgrades(ctx)...); l.HasFatal() {
			l.Sort()
			return nil, l
		}
	}
	res := &ApplyResult{Plugins: p.plan.Names(), DryRun: a.DryRun}
	var once sync.Once
	var objects map[string][]map[string]any
	var releases map[string][]render.Release
	var objDiags diag.List
	last := len(p.plan.Waves) - 1
	p.engine.SetDeploy(func(ctx context.Context, wave int, plugins []*engine.Planned, m *model.Model) diag.List {
		once.Do(func() {
			if lc.bringUp != nil {
				rc, bl := lc.bringUp(ctx, p, m)
				objDiags = append(objDiags, bl...)
				if bl.HasFatal() {
					return
				}
				a.Cluster.RESTConfig = rc
				if err := connect(ctx); err != nil {
					objDiags.Errorf("", 0, 0, "", "%v", err)
					return
				}
				if objDiags = append(objDiags, downgrades(ctx)...); objDiags.HasFatal() {
					return
				}
			}
			var cl diag.List
			objects, releases, cl = kubeContent(ctx, p, m)
			objDiags = append(objDiags, cl...)
		})
		if objDiags.HasFatal() {
			return objDiags
		}
		var units []deploy.Unit
		for _, pl := range plugins {
			u, err := unit(pl, objects[pl.Package.Name], releases[pl.Package.Name])
			if err != nil {
				var dl diag.List
				dl.Errorf("", 0, 0, "", "plugin %s: %v", pl.Package.Name, err)
				return dl
			}
			units = append(units, u)
		}
		wr, err := d.ApplyWave(ctx, wave, units)
		if wr != nil {
			res.Applied += wr.Applied
			res.Pruned += wr.Pruned
		}
		dl := unitDiags(err)
		if wave == last && !dl.HasFatal() && lc.afterDeploy != nil {
			dl = append(dl, lc.afterDeploy(ctx)...)
		}
		return dl
	})
	p.engine.SetValidate(a.validateHook(p, res))
	run, rl := p.engine.Run(ctx, p.plan, stage.Validate)
	l = append(l, rl...)
	if l.HasFatal() {
		l.Sort()
		return res, l
	}
	res.Validated = slices.Contains(run.Stages, stage.Validate)
	if !a.DryRun && d != nil {
		removed, err := a.removeUnlisted(ctx, d, p.plan.Names())
		res.Removed = removed
		if err != nil {
			l.Errorf("", 0, 0, "", "%v", err)
		}
	}
	res.Duration = time.Since(start).Round(time.Millisecond)
	l.Sort()
	return res, l
}

func (a *Apply) deployer() (*deploy.Deployer, error) {
	rc, err := a.Cluster.Config()
	if err != nil {
		return nil, err
	}
	return deploy.New(rc, deploy.Options{
		Logger: a.cfg.logger(), Events: a.Events, Timeout: a.Timeout, DryRun: a.DryRun, ForceConflicts: a.ForceConflicts, ForceCRDChanges: a.ForceCRDChanges,
		RollbackOnFailure: a.RollbackOnFailure, AllowDowngrade: a.AllowDowngrade, HistoryMax: a.HistoryMax,
	})
}

// removeUnlisted uninstalls installed plugins the plan no longer has. Nothing in the
// plan requires them (the resolver would have kept them), so they go without cascade.
func (a *Apply) removeUnlisted(ctx context.Context, d *deploy.Deployer, planned []string) ([]string, error) {
	invs, err := d.Inventories(ctx)
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, inv := range invs {
		if !slices.Contains(planned, inv.Plugin) {
			gone = append(gone, inv.Plugin)
		}
	}
	if len(gone) == 0 {
		return nil, nil
	}
	faultpoint.Hit("apply:before-remove-unlisted")
	return d.Uninstall(ctx, gone, false)
}

// kubeContent renders every plugin's Kubernetes objects (manifests, with object
// patches applied) and loads its Helm releases' charts, from the finished model.
func kubeContent(ctx context.Context, p *prepared, m *model.Model) (map[string][]map[string]any, map[string][]render.Release, diag.List) {
	return render.Content(ctx, p.renderInput(m))
}

func unit(pl *engine.Planned, objs []map[string]any, rels []render.Release) (deploy.Unit, error) {
	u := deploy.Unit{Plugin: pl.Package.Name, Version: pl.Package.Version.String(), Digest: pl.Package.Digest}
	if up := pl.Package.Manifest.Spec.Upgrade; up != nil {
		u.AllowDowngrade = up.AllowDowngrade
	}
	for _, h := range pl.Package.Manifest.Spec.Health {
		u.Health = append(u.Health, deploy.HealthCheck{APIVersion: h.APIVersion, Kind: h.Kind, Expression: h.Expression})
	}
	if dp := pl.Package.Manifest.Spec.Drift; dp != nil {
		for _, i := range dp.Ignore {
			u.DriftIgnore = append(u.DriftIgnore, deploy.DriftIgnore{APIVersion: i.APIVersion, Kind: i.Kind, Namespace: i.Namespace, Name: i.Name, Paths: i.Paths})
		}
	}
	for _, r := range rels {
		u.Releases = append(u.Releases, deploy.HelmRelease{Name: r.Name, Namespace: r.Namespace, Chart: r.Chart, Values: r.Values, PostRenderer: r.PostRenderer})
	}
	for _, r := range pl.Package.Manifest.Spec.Requires {
		u.Requires = append(u.Requires, r.Name)
	}
	raw, err := json.Marshal(pl.Values.Cluster)
	if err != nil {
		return u, fmt.Errorf("digest values: %w", err)
	}
	sum := sha256.Sum256(raw)
	u.ValuesDigest = "sha256:" + hex.EncodeToString(sum[:])
	for _, o := range objs {
		// A JSON round trip turns json.Number into the int64 and float64 that
		// unstructured objects hold.
		b, err := json.Marshal(o)
		if err != nil {
			return u, fmt.Errorf("encode an object: %w", err)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(b); err != nil {
			return u, fmt.Errorf("decode %s: %w", model.ObjectKey(o), err)
		}
		u.Objects = append(u.Objects, obj)
	}
	return u, nil
}

// unitDiags turns a wave's error into one diagnostic per failed plugin.
func unitDiags(err error) diag.List {
	if err == nil {
		return nil
	}
	var l diag.List
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var ue *deploy.UnitError
		if errors.As(e, &ue) {
			msg := ue.Err.Error()
			if ue.Object != "" {
				msg = ue.Object + ": " + msg
			}
			l = append(l, diag.Diagnostic{Severity: diag.Fatal, Plugin: ue.Plugin, Message: msg})
			continue
		}
		l.Errorf("", 0, 0, "", "%v", e)
	}
	return l
}
