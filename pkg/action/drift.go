package action

import (
	"context"
	"slices"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/render"
	"github.com/kubeplug/kubeplug/pkg/stage"
	"github.com/kubeplug/kubeplug/pkg/values"
)

// Drift compares what a cluster file's plugins would apply with the running
// cluster: objects someone changed since kubeplug applied them, and objects that
// are missing (kubeplug diff --live). Nothing is changed: the API server's dry run
// says what an apply would store.
type Drift struct {
	cfg *Config
	// Target is the running cluster.
	Target KubeconfigTarget
	// StateDir is where the file's local cluster is looked for (see
	// KubeconfigTarget.ForCluster).
	StateDir string
}

// NewDrift returns a Drift action.
func NewDrift(cfg *Config) *Drift { return &Drift{cfg: cfg} }

// Run renders cl and returns, per plugin in plan order, the
// objects that differ from what an apply would make them. Values of Secrets and
// values that contain a plugin's sensitive values are never returned. The objects
// of Helm releases are not compared.
func (a *Drift) Run(ctx context.Context, cl *config.Cluster) ([]deploy.PluginDrift, diag.List) {
	r := a.cfg.newRun(cl, false)
	defer r.close()
	l := r.pipeline(ctx, resolveStep)
	if l.HasFatal() {
		return nil, l
	}
	target, err := a.Target.ForCluster(ctx, a.cfg, cl, a.StateDir)
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	d, err := connect(ctx, a.cfg, target, deploy.Options{})
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	if l = append(l, r.pipeline(ctx, through(stage.Render)...)...); l.HasFatal() {
		l.Sort()
		return nil, l
	}
	objects, releases, cl2 := render.Content(ctx, r.renderInput())
	l = append(l, r.plan.LocatePatches(r.model, cl2)...)
	if l.HasFatal() {
		l.Sort()
		return nil, l
	}
	units := make([]deploy.Unit, 0, len(r.plan.Plugins))
	secrets := map[string][]string{}
	for _, pl := range r.plan.Plugins {
		u, err := unit(pl, objects[pl.Package.Name], releases[pl.Package.Name])
		if err != nil {
			l.Errorf("", 0, 0, "", "plugin %s: %v", pl.Package.Name, err)
			continue
		}
		units = append(units, u)
		secrets[u.Plugin] = sensitiveStrings(pl.Values)
	}
	if l.HasFatal() {
		l.Sort()
		return nil, l
	}
	drift, err := d.Drift(ctx, units)
	l = append(l, unitDiags(err)...)
	for i := range drift {
		redactSensitive(&drift[i], secrets[drift[i].Plugin])
	}
	l.Sort()
	return drift, l
}

// CloudDrift reports what changed outside kubeplug in the cloud resources a
// provider deployed (provider.CloudDrifter: the aws provider's CloudFormation
// drift detection). kubeplug diff --live runs it instead of Drift on such a
// provider, whose cluster kubeplug does not reach.
type CloudDrift struct {
	cfg *Config
	// StateDir as for Up.
	StateDir string
}

// NewCloudDrift returns a CloudDrift action.
func NewCloudDrift(cfg *Config) *CloudDrift { return &CloudDrift{cfg: cfg} }

// Applies says whether cl's provider deploys to a cloud whose drift CloudDrift
// reports.
func (a *CloudDrift) Applies(cl *config.Cluster) bool {
	prov, err := provider.New(provider.Config{ClusterName: cl.Spec.Metadata.Name, Spec: cl.Spec.Spec.Provider, StateDir: a.StateDir, Logger: a.cfg.logger()})
	if err != nil {
		return false
	}
	_, ok := prov.(provider.CloudDrifter)
	return ok
}

// Run detects the drift of every stack cl's provider deployed.
func (a *CloudDrift) Run(ctx context.Context, cl *config.Cluster) ([]provider.StackDrift, diag.List) {
	var l diag.List
	prov, err := provider.New(provider.Config{ClusterName: cl.Spec.Metadata.Name, Spec: cl.Spec.Spec.Provider, StateDir: a.StateDir, Logger: a.cfg.logger()})
	if err != nil {
		cl.Errorf(&l, "/spec/provider", "%v", err)
		return nil, l
	}
	cd, ok := prov.(provider.CloudDrifter)
	if !ok {
		cl.Errorf(&l, "/spec/provider", "the %s provider deploys nothing to a cloud: there is no cloud drift", providerName(cl))
		return nil, l
	}
	res, err := cd.CloudDrift(ctx)
	if err != nil {
		l.Errorf("", 0, 0, "", "cloud drift: %v", err)
	}
	return res, l
}

// sensitiveStrings returns the string values at a plugin's sensitive pointers.
func sensitiveStrings(v *config.Values) []string {
	if v == nil {
		return nil
	}
	var out []string
	var walk func(x any)
	walk = func(x any) {
		switch t := x.(type) {
		case string:
			if t != "" {
				out = append(out, t)
			}
		case map[string]any:
			for _, e := range t {
				walk(e)
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	roots := []map[string]any{v.Cluster}
	for _, pv := range v.Pools {
		roots = append(roots, pv)
	}
	for _, ptr := range v.Sensitive {
		for _, r := range roots {
			if x, ok := values.Get(r, ptr); ok {
				walk(x)
			}
		}
	}
	return out
}

// redactSensitive hides the values of every drifted field whose live or desired
// value contains one of the sensitive strings (numbers and booleans marked
// sensitive are not recognised in other objects).
func redactSensitive(pd *deploy.PluginDrift, secrets []string) {
	if len(secrets) == 0 {
		return
	}
	var reveals func(v any) bool
	reveals = func(v any) bool {
		switch t := v.(type) {
		case string:
			return slices.ContainsFunc(secrets, func(sec string) bool { return strings.Contains(t, sec) })
		case map[string]any:
			for k, e := range t {
				if reveals(k) || reveals(e) {
					return true
				}
			}
		case []any:
			return slices.ContainsFunc(t, reveals)
		}
		return false
	}
	for i := range pd.Objects {
		for j := range pd.Objects[i].Fields {
			f := &pd.Objects[i].Fields[j]
			if reveals(f.Live) || reveals(f.Desired) {
				f.Live, f.Desired, f.Redacted = nil, nil, true
			}
		}
	}
}

// PluginReport is an installed (or enabled but not installed) plugin's status with
// its drift.
type PluginReport struct {
	deploy.PluginStatus
	// Drift counts the plugin's objects that differ from what the cluster file
	// would apply (changed or missing); nil when unknown: no cluster file was
	// given, the file no longer enables the plugin, or it is not installed.
	Drift *int `json:"drift,omitempty"`
	// Drifted names those objects.
	Drifted []string `json:"drifted,omitempty"`
}

// Report returns Run's statuses. With a cluster spec, it adds the plugins the spec
// enables that the cluster does not have (phase NotInstalled), and each installed
// plugin's drift from what the spec would apply; with a nil one, drift is unknown.
func (a *Status) Report(ctx context.Context, cl *config.Cluster) ([]PluginReport, diag.List) {
	if cl != nil {
		target, err := a.Target.ForCluster(ctx, a.cfg, cl, a.StateDir)
		if err != nil {
			var l diag.List
			l.Errorf("", 0, 0, "", "%v", err)
			return nil, l
		}
		if dir := a.Target.neverStarted(ctx, a.cfg, cl, a.StateDir); dir != "" {
			a.expect, a.expectDir = cl, dir
		}
		a.Target = target
	}
	st, l := a.Run(ctx)
	if l.HasFatal() {
		return nil, l
	}
	out := make([]PluginReport, 0, len(st))
	for _, s := range st {
		out = append(out, PluginReport{PluginStatus: s})
	}
	if cl == nil {
		return out, l
	}
	have := map[string]int{}
	for i, s := range out {
		have[s.Plugin] = i
	}
	for _, r := range cl.Enabled() {
		if _, ok := have[r.Name]; !ok {
			out = append(out, PluginReport{PluginStatus: deploy.PluginStatus{Plugin: r.Name, Phase: PhaseNotInstalled}})
		}
	}
	dr := NewDrift(a.cfg)
	dr.Target = a.Target
	drift, dl := dr.Run(ctx, cl)
	l = append(l, dl...)
	for _, pd := range drift {
		i, ok := have[pd.Plugin]
		if !ok {
			continue // not installed: all of it is missing, which says nothing new
		}
		n := len(pd.Objects)
		out[i].Drift = &n
		for _, o := range pd.Objects {
			out[i].Drifted = append(out[i].Drifted, o.Object.String())
		}
	}
	return out, l
}

// PhaseNotInstalled is the phase Status.Report gives a plugin the cluster file
// enables but the cluster does not have.
const PhaseNotInstalled = "NotInstalled"
