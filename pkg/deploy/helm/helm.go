package helm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	helmkube "helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/postrenderer"
	ri "helm.sh/helm/v4/pkg/release"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/internal/faultpoint"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/seal"
)

// Options configure a Manager. The zero value of each field means its default.
type Options struct {
	// Logger receives what recovery does; discarded when nil.
	Logger *slog.Logger
	// Timeout bounds one Helm operation. Default 5m.
	Timeout time.Duration
	// DryRun renders and validates with the API server's dry run; nothing changes,
	// and a pending release is left as it is.
	DryRun bool
	// ForceConflicts takes ownership of fields another field manager owns.
	ForceConflicts bool
	// RollbackOnFailure makes Failed roll changed releases back (or uninstall new
	// ones) instead of marking them failed.
	RollbackOnFailure bool
	// Sealer seals sensitive values in the release records Helm stores; nil
	// stores them as Helm does.
	Sealer *seal.Sealer
}

// Manager installs, upgrades, rolls back and uninstalls Helm releases in the
// cluster its client talks to. It is safe for concurrent use on different
// releases.
type Manager struct {
	c    *kube.Client
	opts Options
}

// New returns a Manager for the cluster c talks to.
func New(c *kube.Client, opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	return &Manager{c: c, opts: opts}
}

// Release is a Helm release a plugin installs. It is installed and upgraded
// through the Helm SDK as a real release (its record in the cluster, `helm list`
// shows it); kubeplug waits for the objects of its manifest as for any other object.
type Release struct {
	Name      string
	Namespace string
	Chart     *chartv2.Chart
	Values    map[string]any
	// PostRenderer, when set, changes what Helm rendered before it is applied.
	PostRenderer postrenderer.PostRenderer
}

// helmMaxHistory bounds the revisions Helm keeps per release: every revision is a
// Secret holding the whole chart.
const helmMaxHistory = 10

// Done is what installing one release did, for a rollback.
type Done struct {
	ref kube.ReleaseRef
	// changed is false when the deployed release already had this chart and values.
	changed bool
	// previous is the revision to roll back to; 0 means the release was new.
	previous int
	rel      *releasev1.Release
}

// Ref is the release.
func (d *Done) Ref() kube.ReleaseRef { return d.ref }

// Revision is the release's revision after the change; 0 when it has none (an
// install that failed).
func (d *Done) Revision() int {
	if d.rel == nil {
		return 0
	}
	return d.rel.Version
}

// HelmFieldManager is the field manager of what the Helm SDK applies for kubeplug.
const HelmFieldManager = "kubeplug-helm"

var helmManagerOnce sync.Once

// Config returns a Helm action configuration for one namespace, talking to the
// deployer's cluster and storing release records as Secrets, as the helm CLI does.
func (m *Manager) Config(namespace string) (*action.Configuration, error) {
	helmManagerOnce.Do(func() {
		// Helm's field manager defaults to the program's name, "kubeplug": the
		// release namespace Helm creates would then take kubeplug's own fields away
		// (its labels and applied digest) from the plugin's Namespace object.
		if helmkube.ManagedFieldsManager == "" {
			helmkube.ManagedFieldsManager = HelmFieldManager
		}
	})
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(m.opts.Logger.Handler()))
	if err := cfg.Init(&restGetter{cfg: m.c.Config, namespace: namespace}, namespace, "secret"); err != nil {
		return nil, fmt.Errorf("set up Helm for namespace %s: %w", namespace, err)
	}
	if kc, ok := cfg.KubeClient.(*helmkube.Client); ok {
		kc.Namespace = namespace
	}
	if m.opts.Sealer != nil {
		cfg.Releases.Driver = sealDriver{Driver: cfg.Releases.Driver, s: m.opts.Sealer}
	}
	if faultpoint.Enabled() {
		cfg.Releases.Driver = faultDriver{cfg.Releases.Driver}
	}
	return cfg, nil
}

// history returns a release's revisions, oldest first; none when it does not exist.
func history(cfg *action.Configuration, name string) ([]*releasev1.Release, error) {
	hist, err := cfg.Releases.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]*releasev1.Release, 0, len(hist))
	for _, h := range hist {
		r, err := asV1(h)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

func asV1(r ri.Releaser) (*releasev1.Release, error) {
	switch v := r.(type) {
	case *releasev1.Release:
		return v, nil
	case releasev1.Release:
		return &v, nil
	}
	return nil, fmt.Errorf("unsupported Helm release type %T", r)
}

// goodRevision is the newest revision among hist that was deployed, 0 if none.
func goodRevision(hist []*releasev1.Release) int {
	for i := len(hist) - 1; i >= 0; i-- {
		if s := hist[i].Info.Status; s == rcommon.StatusDeployed || s == rcommon.StatusSuperseded {
			return hist[i].Version
		}
	}
	return 0
}

// Install installs a release when absent and upgrades it when its chart or
// values differ from the deployed revision. A release left pending by a crashed run
// is first rolled back to its last good revision, or uninstalled when it never had
// one: Helm itself refuses to touch a pending release ("another operation is in
// progress") forever.
func (m *Manager) Install(ctx context.Context, plugin string, h Release) (*Done, error) {
	ref := kube.ReleaseRef{Namespace: h.Namespace, Name: h.Name}
	cfg, err := m.Config(h.Namespace)
	if err != nil {
		return nil, err
	}
	hist, last, err := m.lastRevision(ctx, cfg, ref)
	if err != nil {
		return nil, err
	}
	if err := m.withGenerated(ctx, cfg, ref); err != nil {
		return nil, err
	}
	dryRun := action.DryRunNone
	if m.opts.DryRun {
		dryRun = action.DryRunServer
	}
	labels := map[string]string{"kubeplug.dev/plugin": plugin}
	digest := postRenderDigest(h.PostRenderer)
	if last == nil {
		if digest != "" {
			labels[PostRenderLabel] = digest
		}
		return m.install(ctx, cfg, ref, h, dryRun, labels)
	}
	if last.Info.Status == rcommon.StatusDeployed && sameRelease(last, h) {
		return &Done{ref: ref, rel: last, previous: last.Version}, nil
	}
	labels[PostRenderLabel] = digest
	if digest == "" {
		labels[PostRenderLabel] = "null" // Helm's upgrade removes a label set to "null"
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = h.Namespace
	up.WaitStrategy = helmkube.HookOnlyStrategy
	up.Timeout = m.opts.Timeout
	up.ForceConflicts = m.opts.ForceConflicts
	up.MaxHistory = helmMaxHistory
	up.PostRenderer = h.PostRenderer
	up.DryRunStrategy = dryRun
	up.Labels = labels
	previous := last.Version
	if last.Info.Status != rcommon.StatusDeployed {
		previous = goodRevision(hist)
	}
	faultpoint.Hit("helm:before-upgrade")
	rel, err := up.RunWithContext(ctx, h.Name, h.Chart, h.Values)
	faultpoint.Hit("helm:after-upgrade")
	if err != nil {
		return &Done{ref: ref, changed: true, previous: previous}, fmt.Errorf("upgrade Helm release %s: %w", ref, err)
	}
	r, err := asV1(rel)
	return &Done{ref: ref, changed: true, previous: previous, rel: r}, err
}

// lastRevision reads the release's history and its last revision, nil when
// there is none to upgrade: a pending one left by a crashed run is recovered
// first, and a release that never deployed (its install failed) is
// uninstalled, to start over.
func (m *Manager) lastRevision(ctx context.Context, cfg *action.Configuration, ref kube.ReleaseRef) ([]*releasev1.Release, *releasev1.Release, error) {
	hist, err := history(cfg, ref.Name)
	if err != nil {
		return nil, nil, fmt.Errorf("read the history of Helm release %s: %w", ref, err)
	}
	if n := len(hist); n > 0 && hist[n-1].Info.Status.IsPending() && !m.opts.DryRun {
		if err := m.recoverPending(ctx, cfg, hist); err != nil {
			return nil, nil, fmt.Errorf("recover Helm release %s from %s: %w", ref, hist[n-1].Info.Status, err)
		}
		if hist, err = history(cfg, ref.Name); err != nil {
			return nil, nil, fmt.Errorf("read the history of Helm release %s: %w", ref, err)
		}
	}
	if len(hist) == 0 {
		return hist, nil, nil
	}
	last := hist[len(hist)-1]
	if last.Info.Status != rcommon.StatusDeployed && goodRevision(hist) == 0 && !m.opts.DryRun {
		if err := m.Uninstall(ctx, ref); err != nil {
			return nil, nil, err
		}
		return hist, nil, nil
	}
	return hist, last, nil
}

// withGenerated makes the keys and random strings the chart generates those
// of the installed revisions, else generated now and kept (sealed) before
// Helm stores the revision.
func (m *Manager) withGenerated(ctx context.Context, cfg *action.Configuration, ref kube.ReleaseRef) error {
	gen, err := m.loadGenerated(ctx, ref)
	if err != nil || gen == nil {
		return err
	}
	cfg.CustomTemplateFuncs = gen.funcs()
	if !m.opts.DryRun {
		cfg.Releases.Driver = generatedDriver{Driver: cfg.Releases.Driver, save: func() error { return m.saveGenerated(ctx, gen) }}
	}
	return nil
}

// install installs the release for the first time.
func (m *Manager) install(ctx context.Context, cfg *action.Configuration, ref kube.ReleaseRef, h Release, dryRun action.DryRunStrategy, labels map[string]string) (*Done, error) {
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = h.Name, h.Namespace, true
	// kubeplug waits itself, with kstatus and health expressions, and rolls back.
	in.WaitStrategy = helmkube.HookOnlyStrategy
	in.Timeout = m.opts.Timeout
	in.ServerSideApply, in.ForceConflicts = true, m.opts.ForceConflicts
	in.PostRenderer = h.PostRenderer
	in.DryRunStrategy = dryRun
	in.Labels = labels
	faultpoint.Hit("helm:before-install")
	rel, err := in.RunWithContext(ctx, h.Chart, h.Values)
	faultpoint.Hit("helm:after-install")
	if err != nil {
		return &Done{ref: ref, changed: true}, fmt.Errorf("install Helm release %s: %w", ref, err)
	}
	r, err := asV1(rel)
	return &Done{ref: ref, changed: true, rel: r}, err
}

// recoverPending rolls a pending release back to its last good revision, or
// uninstalls it when it has none (an install that never finished).
func (m *Manager) recoverPending(ctx context.Context, cfg *action.Configuration, hist []*releasev1.Release) error {
	last := hist[len(hist)-1]
	ref := kube.ReleaseRef{Namespace: last.Namespace, Name: last.Name}
	if prev := goodRevision(hist[:len(hist)-1]); prev > 0 {
		m.opts.Logger.Info("rolling back a pending Helm release", "release", ref.String(), "status", string(last.Info.Status), "revision", prev)
		return m.rollbackRelease(ctx, cfg, ref, prev)
	}
	m.opts.Logger.Info("uninstalling a Helm release whose install never finished", "release", ref.String(), "status", string(last.Info.Status))
	return m.Uninstall(ctx, ref)
}

func (m *Manager) rollbackRelease(ctx context.Context, cfg *action.Configuration, ref kube.ReleaseRef, revision int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rb := action.NewRollback(cfg)
	rb.Version = revision
	rb.WaitStrategy = helmkube.HookOnlyStrategy
	rb.Timeout = m.opts.Timeout
	rb.MaxHistory = helmMaxHistory
	rb.ForceConflicts = m.opts.ForceConflicts
	rb.Description = "kubeplug: rollback to " + fmt.Sprint(revision)
	if err := rb.Run(ref.Name); err != nil {
		return fmt.Errorf("roll back Helm release %s to revision %d: %w", ref, revision, err)
	}
	return nil
}

// Uninstall removes a release and its objects; a missing release is no error.
func (m *Manager) Uninstall(ctx context.Context, ref kube.ReleaseRef) error {
	_, _, err := m.Remove(ctx, ref)
	return err
}

// Remove is Uninstall, returning how many objects the release had and the
// objects Helm left in the cluster for their helm.sh/resource-policy: keep
// ("Kind name", as Helm names them).
func (m *Manager) Remove(ctx context.Context, ref kube.ReleaseRef) (int, []string, error) {
	n, info, err := m.remove(ctx, ref)
	return n, keptByHelm(info), err
}

// keptByHelm reads the objects Helm's uninstall lists as kept in its Info:
// "These resources were kept due to the resource policy:\n[Kind] name\n".
func keptByHelm(info string) []string {
	_, list, ok := strings.Cut(info, "kept due to the resource policy:")
	if !ok {
		return nil
	}
	var out []string
	for line := range strings.Lines(list) {
		if kind, name, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "[")), "] "); ok {
			out = append(out, kind+" "+name)
		}
	}
	return out
}

func (m *Manager) remove(ctx context.Context, ref kube.ReleaseRef) (int, string, error) {
	if err := ctx.Err(); err != nil {
		return 0, "", err
	}
	cfg, err := m.Config(ref.Namespace)
	if err != nil {
		return 0, "", err
	}
	un := action.NewUninstall(cfg)
	un.IgnoreNotFound = true
	un.WaitStrategy = helmkube.HookOnlyStrategy
	un.Timeout = m.opts.Timeout
	un.DeletionPropagation = "background"
	un.DryRun = m.opts.DryRun // Helm only reads the release: nothing is deleted
	faultpoint.Hit("helm:before-uninstall")
	resp, err := un.Run(ref.Name)
	faultpoint.Hit("helm:after-uninstall")
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return 0, "", fmt.Errorf("uninstall Helm release %s: %w", ref, err)
	}
	if !m.opts.DryRun {
		if err := m.deleteGenerated(ctx, ref); err != nil {
			return 0, "", err
		}
	}
	if resp == nil || resp.Release == nil {
		return 0, "", nil
	}
	rel, err := asV1(resp.Release)
	if err != nil {
		return 0, resp.Info, nil //nolint:nilerr // the release is gone; only the count is unknown
	}
	return len(releaseutil.SplitManifests(rel.Manifest)), resp.Info, nil
}

// undoRelease reverts what Install did after its objects failed to become
// ready: back to the previous revision, or uninstalled when it was new.
func (m *Manager) undoRelease(ctx context.Context, done *Done) error {
	if !done.changed {
		return nil
	}
	if done.previous == 0 {
		return m.Uninstall(ctx, done.ref)
	}
	cfg, err := m.Config(done.ref.Namespace)
	if err != nil {
		return err
	}
	return m.rollbackRelease(ctx, cfg, done.ref, done.previous)
}

// failRelease records in the release that its objects did not become ready, so that
// `helm list` says failed and the next apply upgrades it even with nothing changed.
func (m *Manager) failRelease(done *Done, why error) {
	if done.rel == nil || !done.changed {
		return
	}
	cfg, err := m.Config(done.ref.Namespace)
	if err != nil {
		return
	}
	done.rel.SetStatus(rcommon.StatusFailed, truncate("kubeplug: not ready: "+why.Error(), action.MaxDescriptionLength))
	if err := cfg.Releases.Update(done.rel); err != nil {
		m.opts.Logger.Warn("could not mark a Helm release failed", "release", done.ref.String(), "error", err)
	}
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

// sameRelease reports whether the deployed release has the chart and values h asks
// for, compared by content (metadata, templates, values, schema and files).
func sameRelease(rel *releasev1.Release, h Release) bool {
	if h.PostRenderer != nil && postRenderDigest(h.PostRenderer) == "" {
		return false // a post-renderer that cannot say what it does
	}
	return ChartDigest(rel.Chart) == ChartDigest(h.Chart) && ValuesDigest(rel.Config) == ValuesDigest(h.Values) &&
		rel.Labels[PostRenderLabel] == postRenderDigest(h.PostRenderer)
}

// PostRenderLabel is the release label that records what its post-renderer
// did (its PostRenderDigester's digest, shortened to fit a label), so that a
// change of the post-renderer alone — an object patch added, changed or gone,
// with the chart and values as they were — upgrades the release.
const PostRenderLabel = "kubeplug.dev/post-render"

// PostRenderDigester is a post-renderer that can say what it does: two with
// one digest change what Helm renders alike.
type PostRenderDigester interface {
	postrenderer.PostRenderer
	Digest() string
}

// postRenderDigest is p's digest as a label value; "" for none, and for one
// that is not a PostRenderDigester.
func postRenderDigest(p postrenderer.PostRenderer) string {
	d, ok := p.(PostRenderDigester)
	if !ok || p == nil {
		return ""
	}
	sum := sha256.Sum256([]byte(d.Digest()))
	return hex.EncodeToString(sum[:16]) // a label value is at most 63 characters
}

// ChartDigest identifies a chart by its content: metadata, templates, files,
// values, schema and dependencies.
func ChartDigest(c *chartv2.Chart) string {
	if c == nil {
		return ""
	}
	sum := sha256.New()
	enc := json.NewEncoder(sum)
	_ = enc.Encode(c.Metadata)
	files := map[string][]byte{}
	for _, f := range c.Templates {
		files["t/"+f.Name] = f.Data
	}
	for _, f := range c.Files {
		files["f/"+f.Name] = f.Data
	}
	_ = enc.Encode(files) // map keys are encoded sorted
	_ = enc.Encode(c.Values)
	_ = enc.Encode(c.Schema)
	for _, dep := range c.Dependencies() {
		sum.Write([]byte(ChartDigest(dep)))
	}
	return hex.EncodeToString(sum.Sum(nil))
}

// ValuesDigest identifies values; "" for none.
func ValuesDigest(v map[string]any) string {
	if len(v) == 0 {
		return ""
	}
	raw, _ := json.Marshal(v) // values are plain JSON: cannot fail
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// Objects parses a release's manifest into objects to wait for, placing
// namespaced objects without a namespace in the release's namespace as Helm does.
func (m *Manager) Objects(rel *releasev1.Release) ([]*unstructured.Unstructured, error) {
	if rel == nil {
		return nil, nil
	}
	split := releaseutil.SplitManifests(rel.Manifest)
	keys := make([]string, 0, len(split))
	for k := range split {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var out []*unstructured.Unstructured
	for _, k := range keys {
		doc := strings.TrimSpace(split[k])
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("parse the manifest of Helm release %s/%s: %w", rel.Namespace, rel.Name, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetNamespace() == "" {
			u.SetNamespace(rel.Namespace)
		}
		if _, err := m.c.Resource(u); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// restGetter hands Helm the deployer's REST config, so that Helm talks to the same
// cluster with the same credentials without a kubeconfig file.
type restGetter struct {
	cfg       *rest.Config
	namespace string
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(rest.CopyConfig(g.cfg))
	if err != nil {
		return nil, err
	}
	return memory.NewMemCacheClient(dc), nil
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	dc, err := g.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	return restmapper.NewDeferredDiscoveryRESTMapper(dc), nil
}

func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return &namespaceConfig{getter: g}
}

// namespaceConfig is the clientcmd.ClientConfig of a restGetter: its REST config and
// the release's namespace.
type namespaceConfig struct{ getter *restGetter }

func (c *namespaceConfig) RawConfig() (clientcmdapi.Config, error) { return clientcmdapi.Config{}, nil }
func (c *namespaceConfig) ClientConfig() (*rest.Config, error)     { return c.getter.ToRESTConfig() }
func (c *namespaceConfig) Namespace() (string, bool, error)        { return c.getter.namespace, true, nil }
func (c *namespaceConfig) ConfigAccess() clientcmd.ConfigAccess {
	return clientcmd.NewDefaultPathOptions()
}

// faultDriver marks fault points inside a Helm SDK call, where Helm writes its
// release records: right after it recorded a release pending (before it touches
// the release's objects), and right before it records one deployed (after it
// applied them). A run killed at either leaves the release pending-*, the state
// Helm itself never recovers from. Used only when a fault point is set.
type faultDriver struct{ driver.Driver }

func (f faultDriver) Create(key string, rls ri.Releaser) error {
	err := f.Driver.Create(key, rls)
	if r, e := asV1(rls); err == nil && e == nil && r.Info != nil && r.Info.Status.IsPending() {
		faultpoint.Hit("helm:pending-recorded")
	}
	return err
}

func (f faultDriver) Update(key string, rls ri.Releaser) error {
	if r, e := asV1(rls); e == nil && r.Info != nil && r.Info.Status == rcommon.StatusDeployed {
		faultpoint.Hit("helm:before-deployed-recorded")
	}
	return f.Driver.Update(key, rls)
}

// Result is what bringing a plugin's Helm releases to their state did.
type Result struct {
	// Done says what happened to each release, in order, for a rollback and for
	// the record (Done.Revision).
	Done []*Done
	// Objects are the objects of the releases' manifests, to wait for.
	Objects []*unstructured.Unstructured
}

// InstallAll installs or upgrades a plugin's Helm releases in order and returns the
// objects of their manifests. When one fails, those already changed are reverted if
// Options.RollbackOnFailure says so.
func (m *Manager) InstallAll(ctx context.Context, plugin string, rels []Release) (*Result, error) {
	return m.eachRelease(ctx, len(rels), func(i int) (*Done, error) {
		return m.Install(ctx, plugin, rels[i])
	})
}

// RestoreAll rolls releases back to the revisions a record kept (by
// "namespace/name"), in order, with Restore.
func (m *Manager) RestoreAll(ctx context.Context, refs []kube.ReleaseRef, revisions map[string]int) (*Result, error) {
	return m.eachRelease(ctx, len(refs), func(i int) (*Done, error) {
		return m.Restore(ctx, refs[i], revisions[refs[i].String()])
	})
}

// eachRelease brings n releases to their state one after the other with do and
// collects their manifests' objects; when one fails, those already changed are
// reverted if Options.RollbackOnFailure says so.
func (m *Manager) eachRelease(ctx context.Context, n int, do func(i int) (*Done, error)) (*Result, error) {
	out := &Result{}
	for i := range n {
		done, err := do(i)
		if done != nil {
			out.Done = append(out.Done, done)
		}
		if err != nil {
			return nil, m.Failed(ctx, out.Done, err)
		}
		objs, err := m.Objects(done.rel)
		if err != nil {
			return nil, m.Failed(ctx, out.Done, err)
		}
		out.Objects = append(out.Objects, objs...)
	}
	return out, nil
}

// Failed reverts (with RollbackOnFailure) or marks failed the releases that
// changed, after cause, and returns cause with what the rollback did.
func (m *Manager) Failed(ctx context.Context, done []*Done, cause error) error {
	var errs []error
	rolled := 0
	for i := len(done) - 1; i >= 0; i-- {
		r := done[i]
		if !r.changed {
			continue
		}
		if !m.opts.RollbackOnFailure {
			m.failRelease(r, cause)
			continue
		}
		// Roll back even when ctx is done: a half-upgraded release is worse.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.Timeout)
		err := m.undoRelease(rctx, r)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rolled++
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w; rollback failed: %w", cause, errors.Join(errs...))
	}
	if rolled > 0 {
		return fmt.Errorf("%w (rolled back %d Helm release(s))", cause, rolled)
	}
	return cause
}

// Minus returns the releases of a that b does not have.
func Minus(a, b []kube.ReleaseRef) []kube.ReleaseRef {
	var out []kube.ReleaseRef
	for _, r := range a {
		if !slices.Contains(b, r) {
			out = append(out, r)
		}
	}
	return out
}

// Restore rolls a release back to a recorded revision (0: keeps what is deployed),
// recovering it first when a crashed run left it pending; one already deployed
// with that revision's chart and values is left alone.
func (m *Manager) Restore(ctx context.Context, ref kube.ReleaseRef, revision int) (*Done, error) {
	cfg, err := m.Config(ref.Namespace)
	if err != nil {
		return nil, err
	}
	hist, err := m.settledHistory(ctx, cfg, ref, revision)
	if err != nil {
		return nil, err
	}
	last := hist[len(hist)-1]
	var want *releasev1.Release
	for _, h := range hist {
		if h.Version == revision {
			want = h
		}
	}
	if revision == 0 {
		want = last // not recorded: keep what is deployed
	}
	if want == nil {
		return nil, fmt.Errorf("Helm release %s no longer has revision %d (Helm keeps %d); its oldest is %d", ref, revision, helmMaxHistory, hist[0].Version) //nolint:staticcheck // Helm is a name
	}
	if last.Info.Status == rcommon.StatusDeployed && ChartDigest(last.Chart) == ChartDigest(want.Chart) && ValuesDigest(last.Config) == ValuesDigest(want.Config) {
		return &Done{ref: ref, rel: last, previous: last.Version}, nil
	}
	previous := last.Version
	if last.Info.Status != rcommon.StatusDeployed {
		previous = goodRevision(hist)
	}
	if err := m.rollbackRelease(ctx, cfg, ref, revision); err != nil {
		return &Done{ref: ref, changed: true, previous: previous}, err
	}
	hist, err = history(cfg, ref.Name)
	if err != nil {
		return &Done{ref: ref, changed: true, previous: previous}, fmt.Errorf("read the history of Helm release %s: %w", ref, err)
	}
	if len(hist) == 0 {
		return &Done{ref: ref, changed: true, previous: previous}, fmt.Errorf("Helm release %s has no revision after its rollback to %d", ref, revision) //nolint:staticcheck // Helm is a name
	}
	return &Done{ref: ref, changed: true, previous: previous, rel: hist[len(hist)-1]}, nil
}

// settledHistory is the history of the installed release ref, after
// recovering it from an operation left pending; an error says why its
// revision cannot be restored when it is not installed (any more).
func (m *Manager) settledHistory(ctx context.Context, cfg *action.Configuration, ref kube.ReleaseRef, revision int) ([]*releasev1.Release, error) {
	hist, err := history(cfg, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("read the history of Helm release %s: %w", ref, err)
	}
	if len(hist) == 0 {
		return nil, fmt.Errorf("Helm release %s is no longer installed, so its revision %d cannot be restored; apply the cluster file of that version instead", ref, revision) //nolint:staticcheck // Helm is a name
	}
	last := hist[len(hist)-1]
	if !last.Info.Status.IsPending() {
		return hist, nil
	}
	if err := m.recoverPending(ctx, cfg, hist); err != nil {
		return nil, fmt.Errorf("recover Helm release %s from %s: %w", ref, last.Info.Status, err)
	}
	if hist, err = history(cfg, ref.Name); err != nil {
		return nil, fmt.Errorf("read the history of Helm release %s: %w", ref, err)
	}
	if len(hist) == 0 {
		return nil, fmt.Errorf("Helm release %s had no deployed revision and was uninstalled; its revision %d cannot be restored", ref, revision) //nolint:staticcheck // Helm is a name
	}
	return hist, nil
}

// Status is the status Helm records for the release's last revision.
func (m *Manager) Status(r kube.ReleaseRef) string {
	cfg, err := m.Config(r.Namespace)
	if err != nil {
		return err.Error()
	}
	hist, err := history(cfg, r.Name)
	if err != nil {
		return err.Error()
	}
	if len(hist) == 0 {
		return "missing"
	}
	last := hist[len(hist)-1]
	return fmt.Sprintf("%s (revision %d)", last.Info.Status, last.Version)
}
