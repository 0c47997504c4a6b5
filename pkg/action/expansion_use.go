package action

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/expansion"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/render"
	"github.com/kubeplug/kubeplug/pkg/sign"
)

// ExpansionUse says which expansion packages every run merges (up, apply, plan,
// render, diff with --expansion-dir; see docs/expansions.md). The zero value uses
// none, and then a run is exactly what it is without expansions.
type ExpansionUse struct {
	// Dirs are scanned for expansions (directories holding expansion.yaml and
	// .tar archives).
	Dirs []string
	// Keys are trusted public key files; with any, every expansion must be
	// signed by one.
	Keys []string
	// SiteRegistry is host:port of the registry the cluster pulls from: the
	// expansions' images are pushed there before deploying, and every image
	// reference in the rendered objects is rewritten to it. Empty: images keep
	// their names, and up pushes them into a provider's own registry (the
	// local provider's real nodes pull every registry name through it).
	SiteRegistry string
	// SiteRegistryPlainHTTP talks plain HTTP to the site registry.
	SiteRegistryPlainHTTP bool
	// SiteRegistryRemote are options of every request to the site registry
	// (the controller's: its CA and credentials, read from Secrets). Empty:
	// the defaults (the system's CAs, anonymous).
	SiteRegistryRemote []remote.Option
}

// expansions is a run's use of its expansions: the hook points of the pipeline
// (see [run.around]) call into pkg/expansion, which holds the logic.
type expansions struct {
	set  *expansion.Set
	work string
	// pending says the merge of everything but the provider overrides waits
	// for resolve (up: after the provider step).
	pending bool
	// ranBeforeCluster says whether the beforeCluster hooks ran.
	ranBeforeCluster bool
	pushed           bool
}

// doStep runs one step of the pipeline: the pipeline's one hook point for
// expansions. Without expansions it is s.do.
func (r *run) doStep(ctx context.Context, s step) diag.List {
	if len(r.cfg.Expansions.Dirs) == 0 && r.live.op != "up" {
		return s.do(ctx, r)
	}
	skip, l := r.around(ctx, s.name, before)
	if l.HasFatal() || skip {
		return l
	}
	sl := s.do(ctx, r)
	l = append(l, sl...)
	if !sl.HasFatal() {
		_, al := r.around(ctx, s.name, after)
		l = append(l, al...)
	}
	if r.exp != nil {
		l = r.exp.set.Locate(l)
	}
	return l
}

// when is before or after a step.
type when bool

const (
	before when = true
	after  when = false
)

// expansionHook is what the expansions do at one point of the pipeline.
type expansionHook struct {
	step stepName
	when when
	// changes says the hook changes something outside the run (pushes images,
	// runs an installer's hooks): a dry run leaves it out.
	changes bool
	// do runs it; skip (before a step only) skips the step.
	do func(ctx context.Context, r *run, x *expansions) (skip bool, l diag.List)
}

// expansionHooks are every point where expansions act, in the order they run
// at the same point. A step name is a stepName constant, so a misspelt one does
// not compile.
var expansionHooks = []expansionHook{
	{step: stepResolve, when: before, do: mergePendingExpansions},
	{step: stepResolve, when: after, do: func(_ context.Context, r *run, _ *expansions) (bool, diag.List) {
		return false, r.expansionChecks()
	}},
	{step: stepRender, when: after, do: checkExpansionImages},
	{step: stepProvision, when: before, changes: true, do: beforeClusterHooks(stepProvision)},
	{step: stepConnect, when: before, changes: true, do: beforeClusterHooks(stepConnect)},
	{step: stepConnect, when: after, changes: true, do: func(ctx context.Context, r *run, _ *expansions) (bool, diag.List) {
		return false, r.runHooks(ctx, v1alpha1.HookControlPlaneReady, string(stepConnect), true)
	}},
	{step: stepDeploy, when: before, changes: true, do: pushExpansionImagesOnce},
	{step: stepAfterDeploy, when: before, do: skipWhatTheSiteProvides(stepAfterDeploy)},
	{step: stepValidate, when: before, do: skipWhatTheSiteProvides(stepValidate)},
	{step: stepRecord, when: after, changes: true, do: func(ctx context.Context, r *run, _ *expansions) (bool, diag.List) {
		return false, r.runHooks(ctx, v1alpha1.HookAfterInstall, string(stepRecord), true)
	}},
}

// around is called by doStep for expansions, before and after every step: it
// finds the run's expansions (at the first step, and in up's state directory
// after the provider step), then runs the hooks of that point
// (expansionHooks). It reports whether to skip the step (a skipStep of an
// expansion) and its own diagnostics. Without expansions it does nothing.
func (r *run) around(ctx context.Context, s stepName, w when) (bool, diag.List) {
	l := r.findExpansions(ctx, s, w)
	x := r.exp
	if x == nil || l.HasFatal() {
		return false, l
	}
	for _, h := range expansionHooks {
		if h.step != s || h.when != w || h.changes && r.live.dryRun {
			continue
		}
		skip, hl := h.do(ctx, r, x)
		if l = append(l, hl...); skip || hl.HasFatal() {
			return skip, l
		}
	}
	return false, l
}

// findExpansions scans --expansion-dir at the run's first step (before up's
// provider step only the provider overrides are merged: the provider is chosen
// from them, and the state directory it names may hold more expansions), and
// the provider's state directory after up's provider step.
func (r *run) findExpansions(ctx context.Context, s stepName, w when) diag.List {
	dirs := r.cfg.Expansions.Dirs
	switch up := r.live.op == "up"; {
	case r.exp == nil && w == before && len(dirs) > 0:
		return r.scanExpansions(ctx, dirs, s == stepProvider)
	case up && w == after && s == stepProvider:
		return r.stateDirExpansions(ctx)
	}
	return nil
}

// mergePendingExpansions merges what waited for resolve (up: everything but the
// provider overrides).
func mergePendingExpansions(_ context.Context, r *run, x *expansions) (bool, diag.List) {
	if !x.pending {
		return false, nil
	}
	x.pending = false
	return false, x.set.MergePlugins(r.cluster.Spec)
}

// skipWhatTheSiteProvides skips step when an expansion says the site provides
// it (skipSteps).
func skipWhatTheSiteProvides(step stepName) func(context.Context, *run, *expansions) (bool, diag.List) {
	return func(_ context.Context, _ *run, x *expansions) (bool, diag.List) {
		by, ok := x.set.Skips(string(step))
		if !ok {
			return false, nil
		}
		var l diag.List
		l.Warnf("", 0, 0, "", "step %s skipped: expansion %s says the site provides it (skipSteps)", step, by)
		return true, l
	}
}

// beforeClusterHooks runs the installers' beforeCluster hooks once, before the
// first step that reaches the cluster (provision for up, connect for apply).
func beforeClusterHooks(step stepName) func(context.Context, *run, *expansions) (bool, diag.List) {
	return func(ctx context.Context, r *run, x *expansions) (bool, diag.List) {
		if x.ranBeforeCluster {
			return false, nil
		}
		x.ranBeforeCluster = true
		return false, r.runHooks(ctx, v1alpha1.HookBeforeCluster, string(step), false)
	}
}

// pushExpansionImagesOnce pushes the expansions' images before the first deploy.
func pushExpansionImagesOnce(ctx context.Context, r *run, x *expansions) (bool, diag.List) {
	if x.pushed {
		return false, nil
	}
	x.pushed = true
	return false, r.pushExpansionImages(ctx)
}

// checkExpansionImages checks after render that every image the rendered
// objects and charts name is carried by an expansion (or in the site
// registry), and with a site registry rewrites each to it.
func checkExpansionImages(ctx context.Context, r *run, x *expansions) (bool, diag.List) {
	use := r.cfg.Expansions
	var site expansion.ImageSource
	if use.SiteRegistry != "" {
		site = r.siteHas
	}
	charts, l := r.chartObjects(ctx)
	if l.HasFatal() {
		return false, l
	}
	l = append(l, x.set.CheckImages(ctx, r.model, charts, site, r.cluster.File)...)
	if use.SiteRegistry != "" && !l.HasFatal() {
		rws := expansion.RewriteImages(r.model, use.SiteRegistry)
		rws = append(rws, expansion.RewriteChartImages(r.model, charts, use.SiteRegistry)...)
		for _, rw := range rws {
			r.log().Info("image rewritten to the site registry", "object", rw.Object, "from", rw.From, "to", rw.To)
		}
	}
	return false, l
}

// scanExpansions finds and verifies the expansions in dirs and merges them into
// a copy of the run's cluster spec: everything, or, with pending, only the
// provider overrides (the rest before resolve).
func (r *run) scanExpansions(ctx context.Context, dirs []string, pending bool) diag.List {
	keys, l := loadKeys(r.cfg.Expansions.Keys)
	if l.HasFatal() {
		return l
	}
	work, err := os.MkdirTemp("", "kubeplug-expansions-")
	if err != nil {
		l.Errorf("", 0, 0, "", "expansions: %v", err)
		return l
	}
	set, sl := expansion.Scan(ctx, expansion.UseOptions{Dirs: dirs, Keys: keys, WorkDir: work})
	r.exp = &expansions{set: set, work: work, pending: pending}
	l = append(l, sl...)
	allow, where, al := r.allowlist(keys)
	if l = append(l, al...); l.HasFatal() {
		return l
	}
	if l = append(l, set.CheckAllowed(allow, where)...); l.HasFatal() {
		return l
	}
	// The spec is the caller's: merge into a copy.
	b, err := json.Marshal(r.cluster.Spec)
	spec := &v1alpha1.Cluster{}
	if err == nil {
		err = json.Unmarshal(b, spec)
	}
	if err != nil {
		l.Errorf(r.cluster.File, 0, 0, "", "expansions: copying the cluster spec: %v", err)
		return l
	}
	if pending {
		l = append(l, set.MergeProvider(spec)...)
	} else {
		l = append(l, set.Merge(spec)...)
	}
	cl := *r.cluster
	cl.Spec = spec
	r.cluster = &cl
	r.logExpansions()
	return l
}

// allowlist is the run's allowlist of what expansions may skip or delegate
// (see siteAllowlist), and the file it is in; nil allows everything.
func (r *run) allowlist(keys []*sign.PublicKey) (*v1alpha1.ExpansionAllow, string, diag.List) {
	return siteAllowlist(r.cluster, keys)
}

// siteAllowlist is cl's allowlist and the file it is in: the cluster file's
// spec.expansions.allow, or the signed file spec.expansions.allowFile names
// (relative to the cluster file), verified with keys (expansion.LoadAllowlist);
// nil allows everything. An unsigned or changed allowlist file, or both set,
// is an error at the field.
func siteAllowlist(cl *config.Cluster, keys []*sign.PublicKey) (*v1alpha1.ExpansionAllow, string, diag.List) {
	var l diag.List
	x := cl.Spec.Spec.Expansions
	switch {
	case x == nil || x.AllowFile == "":
		if x == nil {
			return nil, cl.File, l
		}
		return x.Allow, cl.File, l
	case x.Allow != nil:
		cl.Errorf(&l, "/spec/expansions/allowFile", "expected at most one of allow and allowFile, found both: the site's allowlist is either in the cluster file or signed in a file of its own")
		return nil, cl.File, l
	}
	path := x.AllowFile
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(cl.File), path)
	}
	signed, err := expansion.LoadAllowlist(path, keys)
	if err != nil {
		cl.Errorf(&l, "/spec/expansions/allowFile", "%v", err)
		return nil, cl.File, l
	}
	return signed.Allow, path + " (" + signed.Digest + ", signed by " + signed.KeyID + ")", l
}

func (r *run) logExpansions() {
	for _, e := range r.exp.set.Expansions {
		r.log().Info("using expansion", "expansion", e.Name(), "location", e.Location, "digest", e.Verification.Digest, "signed", e.Verification.Signed)
	}
}

// StateDirExpansions is the directory below a cluster's state directory whose
// expansions up uses as it uses those of --expansion-dir.
const StateDirExpansions = "expansions"

// stateDirExpansions adds the expansions in the state directory of up's
// provider (STATE/expansions) to the run's: they may not override the
// provider, which up has chosen by then.
func (r *run) stateDirExpansions(ctx context.Context) diag.List {
	st, ok := r.prov.(provider.Stateful)
	if !ok {
		return nil
	}
	dir := filepath.Join(st.StateDir(), StateDirExpansions)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil
	}
	dirs := append(slices.Clone(r.cfg.Expansions.Dirs), dir)
	var l diag.List
	if r.exp == nil {
		l = r.scanExpansions(ctx, dirs, true)
	} else {
		// Scan again, all of them: the set is in name order, and the
		// provider overrides of --expansion-dir's are merged already.
		keys, kl := loadKeys(r.cfg.Expansions.Keys)
		if l = kl; l.HasFatal() {
			return l
		}
		set, sl := expansion.Scan(ctx, expansion.UseOptions{Dirs: dirs, Keys: keys, WorkDir: r.exp.work})
		l = append(l, sl...)
		allow, where, al := r.allowlist(keys)
		l = append(l, al...)
		if !al.HasFatal() {
			l = append(l, set.CheckAllowed(allow, where)...)
		}
		r.exp.set = set
		r.logExpansions()
	}
	if l.HasFatal() {
		return l
	}
	for _, e := range r.exp.set.Expansions {
		if filepath.Dir(e.Location) == dir && e.Manifest.Spec.Overrides != nil && len(e.Manifest.Spec.Overrides.Provider) > 0 {
			l.Errorf(e.Location, 0, 0, "spec.overrides.provider", "expansion %s in the state directory overrides the provider, which up has already chosen: pass it with --expansion-dir", e.Name())
		}
	}
	return l
}

// chartObjects renders the model's Helm charts with the cluster's values (as
// render will) and returns their objects, for the expansions' image check and
// rewrite; none when the model has no Helm release.
func (r *run) chartObjects(ctx context.Context) ([]expansion.ChartObject, diag.List) {
	if len(r.model.Kubernetes.HelmReleases) == 0 {
		return nil, nil
	}
	objs, l := render.ChartObjects(ctx, r.renderInput())
	if l.HasFatal() {
		return nil, r.plan.LocatePatches(r.model, l)
	}
	out := make([]expansion.ChartObject, 0, len(objs))
	for _, o := range objs {
		chart := o.Release.Chart
		if o.Release.IsRef() {
			chart = o.Release.ChartRef()
		}
		out = append(out, expansion.ChartObject{Plugin: o.Release.By, Chart: chart, Release: o.Release.Namespace + "/" + o.Release.Name, Template: o.Template, Object: o.Object})
	}
	// Warnings are render's to report, once, when it renders.
	return out, l.Fatal()
}

// site is what the provider learns of the run's expansions (provider.Site):
// nil without any.
func (r *run) site() *provider.Site {
	if r.exp == nil || len(r.exp.set.Expansions) == 0 {
		return nil
	}
	use := r.cfg.Expansions
	s := &provider.Site{Registry: use.SiteRegistry, PlainHTTP: use.SiteRegistryPlainHTTP || use.SiteRegistry != "" && oci.IsLoopback(use.SiteRegistry)}
	for _, e := range r.exp.set.Expansions {
		s.Expansions = append(s.Expansions, e.Manifest.Metadata.Name+" "+e.Manifest.Metadata.Version+" from "+e.Location)
		s.Images = append(s.Images, e.Images...)
	}
	return s
}

// siteHas reports whether the site registry holds img (under its rewritten name).
func (r *run) siteHas(ctx context.Context, img string) bool {
	use := r.cfg.Expansions
	var opts []name.Option
	if use.SiteRegistryPlainHTTP || oci.IsLoopback(use.SiteRegistry) {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(expansion.RewriteImage(img, use.SiteRegistry), opts...)
	if err != nil {
		return false
	}
	_, err = remote.Head(ref, append(slices.Clone(use.SiteRegistryRemote), remote.WithContext(ctx))...)
	return err == nil
}

// pushExpansionImages pushes the expansions' images where the cluster pulls
// from: a provider's own registry when it runs one (the local provider's real
// nodes pull every registry name, the site registry's included, through it),
// else the site registry.
func (r *run) pushExpansionImages(ctx context.Context) diag.List {
	var l diag.List
	x, use := r.exp, r.cfg.Expansions
	if by, ok := x.set.Skips("image-push"); ok {
		r.log().Info("image push skipped", "expansion", by)
		return l
	}
	if loader, ok := r.prov.(provider.ImageLoader); ok && !simulatedOnly(r.cluster.Spec) {
		for _, e := range x.set.Expansions {
			if len(e.Images) == 0 {
				continue
			}
			dir, err := e.ImageLayout(ctx)
			if err != nil {
				l.Errorf(e.Location, 0, 0, "", "the images of expansion %s: %v", e.Name(), err)
				return l
			}
			names, err := loader.LoadImage(ctx, dir)
			if err != nil {
				l.Errorf(e.Location, 0, 0, "", "loading the images of expansion %s into the cluster's registry: %v", e.Name(), err)
				return l
			}
			r.log().Info("images loaded into the cluster's registry", "expansion", e.Name(), "images", len(names))
		}
		return l
	}
	if use.SiteRegistry == "" {
		r.log().Info("expansions' images not pushed: no --site-registry, and the provider runs no registry the nodes pull from")
		return l
	}
	opts := expansion.PushOptions{Insecure: use.SiteRegistryPlainHTTP, Remote: use.SiteRegistryRemote}
	pushed, err := x.set.PushImages(ctx, use.SiteRegistry, opts)
	if err != nil {
		l.Errorf("", 0, 0, "", "pushing the expansions' images to the site registry %s: %v", use.SiteRegistry, err)
		return l
	}
	for _, e := range x.set.Expansions {
		charts, err := e.PushCharts(ctx, use.SiteRegistry, opts)
		if err != nil {
			l.Errorf(e.Location, 0, 0, "", "pushing the charts to the site registry %s: %v", use.SiteRegistry, err)
			return l
		}
		pushed = append(pushed, charts...)
	}
	r.log().Info("images pushed to the site registry", "registry", use.SiteRegistry, "images", len(pushed))
	return l
}

// runHooks runs the expansions' installer hooks at one entry point, which the
// pipeline reaches around step (before it, or after it when after is set).
// Each hook's KUBECONFIG is a file of the run's own holding only the cluster
// being built (with no cluster before it exists), never the user's: a hook's
// kubectl reaches that cluster or none, whatever the user's current context.
func (r *run) runHooks(ctx context.Context, at, step string, after bool) diag.List {
	var l diag.List
	hooks := r.exp.set.Hooks(at)
	if len(hooks) == 0 {
		return l
	}
	kubeconfig := filepath.Join(r.exp.work, "hooks", at+".kubeconfig")
	if err := writeHookKubeconfig(kubeconfig, r.cluster.Spec.Metadata.Name, r.live.rest); err != nil {
		l.Errorf("", 0, 0, "", "writing the kubeconfig for the expansions' %s hooks: %v", at, err)
		return l
	}
	when := "before step " + step
	if after {
		when = "after step " + step
	}
	env := []string{"KUBEPLUG_CLUSTER=" + r.cluster.Spec.Metadata.Name, "KUBEPLUG_HOOK=" + at, "KUBECONFIG=" + kubeconfig}
	if r.cfg.Expansions.SiteRegistry != "" {
		env = append(env, "KUBEPLUG_SITE_REGISTRY="+r.cfg.Expansions.SiteRegistry)
	}
	for _, h := range hooks {
		h.Step = when
		r.log().Info("running expansion hook", "expansion", h.Expansion.Name(), "hook", h.Name, "at", at, "step", when)
		if err := h.Run(ctx, append(env, "KUBEPLUG_EXPANSION_DIR="+h.Expansion.Root)); err != nil {
			l.Errorf(h.Expansion.Location, 0, 0, "", "%v", err)
			return l
		}
	}
	return l
}

// writeHookKubeconfig writes to path a kubeconfig holding only the cluster rc
// reaches, as its current context kubeplug-CLUSTER; with rc nil (no cluster
// yet), one with no cluster at all. Mode 0600: it holds the credentials.
func writeHookKubeconfig(path, cluster string, rc *rest.Config) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	c := clientcmdapi.NewConfig()
	if rc != nil {
		name := ContextName(cluster)
		cl := clientcmdapi.NewCluster()
		cl.Server = rc.Host
		if rc.APIPath != "" && rc.APIPath != "/api" {
			cl.Server = strings.TrimSuffix(rc.Host, "/") + rc.APIPath
		}
		cl.CertificateAuthority, cl.CertificateAuthorityData = rc.CAFile, rc.CAData
		cl.InsecureSkipTLSVerify, cl.TLSServerName = rc.Insecure, rc.ServerName
		u := clientcmdapi.NewAuthInfo()
		u.ClientCertificate, u.ClientCertificateData = rc.CertFile, rc.CertData
		u.ClientKey, u.ClientKeyData = rc.KeyFile, rc.KeyData
		u.Token, u.TokenFile = rc.BearerToken, rc.BearerTokenFile
		u.Username, u.Password = rc.Username, rc.Password
		u.Exec, u.AuthProvider = rc.ExecProvider, rc.AuthProvider
		u.Impersonate, u.ImpersonateGroups = rc.Impersonate.UserName, rc.Impersonate.Groups
		kc := clientcmdapi.NewContext()
		kc.Cluster, kc.AuthInfo = name, name
		c.Clusters[name], c.AuthInfos[name], c.Contexts[name] = cl, u, kc
		c.CurrentContext = name
	}
	return clientcmd.WriteToFile(*c, path)
}

// expansionsDoc adds to a plan what the run's expansions do besides their
// plugins: each installer hook with the step it runs at, and each step and
// check skipped or delegated, with the expansion that does it.
func expansionsDoc(r *run, doc *engine.PlanDoc) {
	if r.exp == nil || len(r.exp.set.Expansions) == 0 {
		return
	}
	pe := &engine.PlanExpansions{}
	for _, e := range r.exp.set.Expansions {
		pe.Used = append(pe.Used, e.Name()+" ("+e.Location+")")
		s := e.Manifest.Spec
		for _, st := range s.SkipSteps {
			pe.Skipped = append(pe.Skipped, engine.PlanSkip{Expansion: e.Manifest.Metadata.Name, What: "step", Name: st})
		}
		for _, c := range s.SkipConditions {
			pe.Skipped = append(pe.Skipped, engine.PlanSkip{Expansion: e.Manifest.Metadata.Name, What: "check", Name: c})
		}
		for _, d := range s.DelegateConditions {
			pe.Skipped = append(pe.Skipped, engine.PlanSkip{Expansion: e.Manifest.Metadata.Name, What: "delegated", Name: d.Check,
				To: "operator " + d.Operator + " (condition " + d.Condition + " on SiteCondition " + d.Operator + ")"})
		}
	}
	for _, at := range []string{v1alpha1.HookBeforeCluster, v1alpha1.HookControlPlaneReady, v1alpha1.HookAfterInstall} {
		for _, h := range r.exp.set.Hooks(at) {
			run := h.Script
			if run == "" {
				run = strings.Join(h.Command, " ")
			}
			pe.Hooks = append(pe.Hooks, engine.PlanHook{Expansion: h.Expansion.Manifest.Metadata.Name, Name: h.Name, At: at, Step: h.Step, Run: run})
		}
	}
	doc.Expansions = pe
}

// closeExpansions removes what the run unpacked.
func (r *run) closeExpansions() {
	if r.exp != nil && r.exp.work != "" {
		_ = os.RemoveAll(r.exp.work)
	}
}

// expansionChecks changes the planned plugins' validate checks as the
// expansions skip and delegate them; a check they name that the plan does not
// have is an error at its field.
func (r *run) expansionChecks() diag.List {
	set := r.exp.set
	names := map[string][]string{}
	for _, pl := range r.plan.Plugins {
		for _, c := range pl.Checks {
			names[pl.Package.Name] = append(names[pl.Package.Name], c.Name)
		}
		if _, ok := names[pl.Package.Name]; !ok {
			names[pl.Package.Name] = nil
		}
	}
	l := set.CheckNames(names)
	l = append(l, set.CheckProviderNames(providerSteps(r.cluster.Spec.Spec.Provider))...)
	if l.HasFatal() {
		return l
	}
	for _, pl := range r.plan.Plugins {
		checks, skipped, changed := set.Checks(pl.Package.Name, pl.Checks)
		if !changed {
			continue
		}
		pl.Checks = checks
		for _, msg := range skipped {
			l.Warnf("", 0, 0, "", "%s", msg)
		}
	}
	return l
}

// simulatedOnly reports whether the cluster's nodes are all simulated (the local
// provider without real pools): they pull no image, and its registry does not run.
func simulatedOnly(c *v1alpha1.Cluster) bool {
	p := c.Spec.Provider
	return p != nil && p.Local != nil && len(p.Local.RealPools) == 0
}
