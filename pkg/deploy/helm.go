package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
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
)

// HelmRelease is a Helm release a plugin installs. It is installed and upgraded
// through the Helm SDK as a real release (its record in the cluster, `helm list`
// shows it); kubeplug waits for the objects of its manifest as for any other object.
type HelmRelease struct {
	Name      string
	Namespace string
	Chart     *chartv2.Chart
	Values    map[string]any
	// PostRenderer, when set, changes what Helm rendered before it is applied.
	PostRenderer postrenderer.PostRenderer
}

// ReleaseRef names a Helm release in an inventory.
type ReleaseRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (r ReleaseRef) String() string { return r.Namespace + "/" + r.Name }

// helmMaxHistory bounds the revisions Helm keeps per release: every revision is a
// Secret holding the whole chart.
const helmMaxHistory = 10

// releaseDone is what installing one release did, for a rollback.
type releaseDone struct {
	ref ReleaseRef
	// changed is false when the deployed release already had this chart and values.
	changed bool
	// previous is the revision to roll back to; 0 means the release was new.
	previous int
	rel      *releasev1.Release
}

// HelmFieldManager is the field manager of what the Helm SDK applies for kubeplug.
const HelmFieldManager = "kubeplug-helm"

var helmManagerOnce sync.Once

// helmConfig returns a Helm action configuration for one namespace, talking to the
// deployer's cluster and storing release records as Secrets, as the helm CLI does.
func (d *Deployer) helmConfig(namespace string) (*action.Configuration, error) {
	helmManagerOnce.Do(func() {
		// Helm's field manager defaults to the program's name, "kubeplug": the
		// release namespace Helm creates would then take kubeplug's own fields away
		// (its labels and applied digest) from the plugin's Namespace object.
		if kube.ManagedFieldsManager == "" {
			kube.ManagedFieldsManager = HelmFieldManager
		}
	})
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(d.opts.Logger.Handler()))
	if err := cfg.Init(&restGetter{cfg: d.cfg, namespace: namespace}, namespace, "secret"); err != nil {
		return nil, fmt.Errorf("set up Helm for namespace %s: %w", namespace, err)
	}
	if kc, ok := cfg.KubeClient.(*kube.Client); ok {
		kc.Namespace = namespace
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

// installRelease installs a release when absent and upgrades it when its chart or
// values differ from the deployed revision. A release left pending by a crashed run
// is first rolled back to its last good revision, or uninstalled when it never had
// one: Helm itself refuses to touch a pending release ("another operation is in
// progress") forever.
func (d *Deployer) installRelease(ctx context.Context, plugin string, h HelmRelease) (*releaseDone, error) {
	ref := ReleaseRef{Namespace: h.Namespace, Name: h.Name}
	cfg, err := d.helmConfig(h.Namespace)
	if err != nil {
		return nil, err
	}
	hist, err := history(cfg, h.Name)
	if err != nil {
		return nil, fmt.Errorf("read the history of Helm release %s: %w", ref, err)
	}
	if n := len(hist); n > 0 && hist[n-1].Info.Status.IsPending() && !d.opts.DryRun {
		if err := d.recoverPending(ctx, cfg, hist); err != nil {
			return nil, fmt.Errorf("recover Helm release %s from %s: %w", ref, hist[n-1].Info.Status, err)
		}
		if hist, err = history(cfg, h.Name); err != nil {
			return nil, fmt.Errorf("read the history of Helm release %s: %w", ref, err)
		}
	}
	var last *releasev1.Release
	if n := len(hist); n > 0 {
		last = hist[n-1]
	}
	// A release that never deployed (its install failed) cannot be upgraded: start over.
	if last != nil && last.Info.Status != rcommon.StatusDeployed && goodRevision(hist) == 0 && !d.opts.DryRun {
		if err := d.uninstallRelease(ctx, ref); err != nil {
			return nil, err
		}
		last = nil
	}
	dryRun := action.DryRunNone
	if d.opts.DryRun {
		dryRun = action.DryRunServer
	}
	labels := map[string]string{"kubeplug.dev/plugin": plugin}
	if last == nil {
		in := action.NewInstall(cfg)
		in.ReleaseName, in.Namespace, in.CreateNamespace = h.Name, h.Namespace, true
		// kubeplug waits itself, with kstatus and health expressions, and rolls back.
		in.WaitStrategy = kube.HookOnlyStrategy
		in.Timeout = d.opts.Timeout
		in.ServerSideApply, in.ForceConflicts = true, d.opts.ForceConflicts
		in.PostRenderer = h.PostRenderer
		in.DryRunStrategy = dryRun
		in.Labels = labels
		faultpoint.Hit("helm:before-install")
		rel, err := in.RunWithContext(ctx, h.Chart, h.Values)
		faultpoint.Hit("helm:after-install")
		if err != nil {
			return &releaseDone{ref: ref, changed: true}, fmt.Errorf("install Helm release %s: %w", ref, err)
		}
		r, err := asV1(rel)
		return &releaseDone{ref: ref, changed: true, rel: r}, err
	}
	if last.Info.Status == rcommon.StatusDeployed && sameRelease(last, h) {
		return &releaseDone{ref: ref, rel: last, previous: last.Version}, nil
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = h.Namespace
	up.WaitStrategy = kube.HookOnlyStrategy
	up.Timeout = d.opts.Timeout
	up.ForceConflicts = d.opts.ForceConflicts
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
		return &releaseDone{ref: ref, changed: true, previous: previous}, fmt.Errorf("upgrade Helm release %s: %w", ref, err)
	}
	r, err := asV1(rel)
	return &releaseDone{ref: ref, changed: true, previous: previous, rel: r}, err
}

// recoverPending rolls a pending release back to its last good revision, or
// uninstalls it when it has none (an install that never finished).
func (d *Deployer) recoverPending(ctx context.Context, cfg *action.Configuration, hist []*releasev1.Release) error {
	last := hist[len(hist)-1]
	ref := ReleaseRef{Namespace: last.Namespace, Name: last.Name}
	if prev := goodRevision(hist[:len(hist)-1]); prev > 0 {
		d.opts.Logger.Info("rolling back a pending Helm release", "release", ref.String(), "status", string(last.Info.Status), "revision", prev)
		return d.rollbackRelease(ctx, cfg, ref, prev)
	}
	d.opts.Logger.Info("uninstalling a Helm release whose install never finished", "release", ref.String(), "status", string(last.Info.Status))
	return d.uninstallRelease(ctx, ref)
}

func (d *Deployer) rollbackRelease(ctx context.Context, cfg *action.Configuration, ref ReleaseRef, revision int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rb := action.NewRollback(cfg)
	rb.Version = revision
	rb.WaitStrategy = kube.HookOnlyStrategy
	rb.Timeout = d.opts.Timeout
	rb.MaxHistory = helmMaxHistory
	rb.ForceConflicts = d.opts.ForceConflicts
	rb.Description = "kubeplug: rollback to " + fmt.Sprint(revision)
	if err := rb.Run(ref.Name); err != nil {
		return fmt.Errorf("roll back Helm release %s to revision %d: %w", ref, revision, err)
	}
	return nil
}

// uninstallRelease removes a release and its objects; a missing release is no error.
func (d *Deployer) uninstallRelease(ctx context.Context, ref ReleaseRef) error {
	_, err := d.removeRelease(ctx, ref)
	return err
}

// removeRelease is uninstallRelease, returning how many objects the release had.
func (d *Deployer) removeRelease(ctx context.Context, ref ReleaseRef) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	cfg, err := d.helmConfig(ref.Namespace)
	if err != nil {
		return 0, err
	}
	un := action.NewUninstall(cfg)
	un.IgnoreNotFound = true
	un.WaitStrategy = kube.HookOnlyStrategy
	un.Timeout = d.opts.Timeout
	un.DeletionPropagation = "background"
	faultpoint.Hit("helm:before-uninstall")
	resp, err := un.Run(ref.Name)
	faultpoint.Hit("helm:after-uninstall")
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return 0, fmt.Errorf("uninstall Helm release %s: %w", ref, err)
	}
	if resp == nil || resp.Release == nil {
		return 0, nil
	}
	rel, err := asV1(resp.Release)
	if err != nil {
		return 0, nil //nolint:nilerr // the release is gone; only the count is unknown
	}
	return len(releaseutil.SplitManifests(rel.Manifest)), nil
}

// undoRelease reverts what installRelease did after its objects failed to become
// ready: back to the previous revision, or uninstalled when it was new.
func (d *Deployer) undoRelease(ctx context.Context, done *releaseDone) error {
	if !done.changed {
		return nil
	}
	if done.previous == 0 {
		return d.uninstallRelease(ctx, done.ref)
	}
	cfg, err := d.helmConfig(done.ref.Namespace)
	if err != nil {
		return err
	}
	return d.rollbackRelease(ctx, cfg, done.ref, done.previous)
}

// failRelease records in the release that its objects did not become ready, so that
// `helm list` says failed and the next apply upgrades it even with nothing changed.
func (d *Deployer) failRelease(done *releaseDone, why error) {
	if done.rel == nil || !done.changed {
		return
	}
	cfg, err := d.helmConfig(done.ref.Namespace)
	if err != nil {
		return
	}
	done.rel.SetStatus(rcommon.StatusFailed, truncate("kubeplug: not ready: "+why.Error(), action.MaxDescriptionLength))
	if err := cfg.Releases.Update(done.rel); err != nil {
		d.opts.Logger.Warn("could not mark a Helm release failed", "release", done.ref.String(), "error", err)
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
func sameRelease(rel *releasev1.Release, h HelmRelease) bool {
	return chartDigest(rel.Chart) == chartDigest(h.Chart) && valuesDigest(rel.Config) == valuesDigest(h.Values)
}

func chartDigest(c *chartv2.Chart) string {
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
		sum.Write([]byte(chartDigest(dep)))
	}
	return hex.EncodeToString(sum.Sum(nil))
}

func valuesDigest(v map[string]any) string {
	if len(v) == 0 {
		return ""
	}
	raw, _ := json.Marshal(v) // values are plain JSON: cannot fail
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// releaseObjects parses a release's manifest into objects to wait for, placing
// namespaced objects without a namespace in the release's namespace as Helm does.
func (d *Deployer) releaseObjects(rel *releasev1.Release) ([]*unstructured.Unstructured, error) {
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
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return nil, fmt.Errorf("parse the manifest of Helm release %s/%s: %w", rel.Namespace, rel.Name, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetNamespace() == "" {
			u.SetNamespace(rel.Namespace)
		}
		if _, err := d.mapping(u); err != nil {
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
