package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the server-side apply field manager of everything kubeplug applies.
const FieldManager = "kubeplug"

// Labels put on every object kubeplug applies.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelPlugin    = "kubeplug.dev/plugin"
)

// Options configure a Deployer. The zero value of each field means its default.
type Options struct {
	// Logger receives progress; discarded when nil.
	Logger *slog.Logger
	// Events receives progress events (wave, plugin, objects applied and ready); it is
	// called from one goroutine at a time.
	Events func(Event)
	// Concurrency bounds the API requests in flight. Default 32.
	Concurrency int
	// QPS and Burst of the client. Defaults 500 and 1000: a local API server handles
	// far more than client-go's defaults of 5 and 10.
	QPS   float32
	Burst int
	// Timeout bounds how long one plugin's objects may take to become ready. Default 5m.
	Timeout time.Duration
	// DryRun applies with the server's dry run: everything is validated and
	// defaulted by the API server, nothing is persisted, nothing waited for or pruned.
	DryRun bool
	// ForceConflicts takes ownership of fields another field manager owns, instead of
	// failing with a conflict that names the manager.
	ForceConflicts bool
	// ForceCRDChanges applies CustomResourceDefinition changes that would break
	// existing objects or clients (a removed version or field, a narrowed type),
	// which are otherwise refused before anything of the plugin is applied.
	ForceCRDChanges bool
	// RollbackOnFailure reverts a plugin whose objects did not become ready: its
	// Helm releases back to their previous revisions, then the whole plugin to its
	// previous Ready revision (a new one recorded, "rollback to N"), or uninstalled
	// when it was new.
	RollbackOnFailure bool
	// AllowDowngrade applies a plugin version lower than the installed one, which
	// is otherwise refused unless the installed version declared it safe.
	AllowDowngrade bool
	// HistoryMax bounds the revisions kept per plugin. Default 10.
	HistoryMax int
	// Namespace holds the release records. Default kubeplug-system.
	Namespace string
	// Retry is how transient API errors (unreachable server, throttling, timeouts)
	// are retried. Default: 9 tries, from 200ms doubling to 5s (about 20s: long
	// enough for an API server to restart).
	Retry wait.Backoff
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Events == nil {
		o.Events = func(Event) {}
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 32
	}
	if o.QPS <= 0 {
		o.QPS = 500
	}
	if o.Burst <= 0 {
		o.Burst = 1000
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.HistoryMax <= 0 {
		o.HistoryMax = 10
	}
	if o.Namespace == "" {
		o.Namespace = "kubeplug-system"
	}
	if o.Retry.Steps == 0 {
		o.Retry = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: 9}
	}
}

// Deployer applies, waits for, records, prunes and uninstalls plugins' content.
type Deployer struct {
	opts   Options
	cfg    *rest.Config
	dyn    dynamic.Interface
	core   kubernetes.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	events sync.Mutex
}

// New returns a Deployer for the cluster cfg points at. It does not contact the
// cluster.
func New(cfg *rest.Config, opts Options) (*Deployer, error) {
	opts.defaults()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	cfg.UserAgent = "kubeplug"
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create a dynamic client: %w", err)
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create a client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create a discovery client: %w", err)
	}
	return &Deployer{opts: opts, cfg: cfg, dyn: dyn, core: core, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// Unit is one plugin's content for one apply.
type Unit struct {
	Plugin  string
	Version string
	// Digest is the digest of the plugin package the content came from.
	Digest string
	// ValuesDigest identifies the values the content was rendered with.
	ValuesDigest string
	// AllowDowngrade is what this version's plugin.yaml declares
	// (spec.upgrade.allowDowngrade); it is recorded and lets a later apply move
	// from this version to an older one.
	AllowDowngrade bool
	// Requires names the plugins this one requires; uninstall refuses to remove
	// them while this one is installed.
	Requires []string
	Objects  []*unstructured.Unstructured
	// Releases are installed through the Helm SDK after Objects are applied; their
	// objects are waited for and recorded with the plugin's.
	Releases []HelmRelease
	// Health adds conditions to readiness: an object of a kind a check names is ready
	// only when kstatus says Current and the check's expression holds.
	Health []HealthCheck
	// DriftIgnore names fields of the plugin's objects that others may change
	// (an autoscaler's /spec/replicas): not drift, and no reason to re-apply.
	DriftIgnore []DriftIgnore

	// rollback is the revision a rollback restores: its objects are Objects, its
	// Helm releases are rolled back to the revisions it recorded.
	rollback *Record
	// description, when set, describes the revision the apply records.
	description string
}

// emit sends an event, one at a time.
func (d *Deployer) emit(e Event) {
	d.events.Lock()
	defer d.events.Unlock()
	e.Time = time.Now()
	d.opts.Events(e)
}

// Ping checks that the API server answers, retrying transient failures with
// backoff, so an unreachable cluster is one clear error rather than a failure per
// object.
func (d *Deployer) Ping(ctx context.Context) error {
	return d.retry(ctx, func(ctx context.Context) error {
		_, err := d.core.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
}

// retry runs fn until it succeeds, fails permanently, or the backoff runs out.
func (d *Deployer) retry(ctx context.Context, fn func(context.Context) error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, d.opts.Retry, func(ctx context.Context) (bool, error) {
		last = fn(ctx)
		if last == nil {
			return true, nil
		}
		if transient(last) {
			d.opts.Logger.Debug("retrying after a transient error", "error", last)
			return false, nil
		}
		return false, last
	})
	if wait.Interrupted(err) && last != nil {
		return fmt.Errorf("the API server did not answer after %d tries: %w", d.opts.Retry.Steps, last)
	}
	return err
}

func transient(err error) bool {
	if apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "connection reset") || strings.Contains(s, "EOF")
}

// ObjRef identifies an object across versions of its API.
type ObjRef struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String renders the reference as Kind/namespace/name (group-qualified kinds).
func (r ObjRef) String() string {
	k := r.Kind
	if r.Group != "" {
		k += "." + r.Group
	}
	if r.Namespace == "" {
		return k + "/" + r.Name
	}
	return k + "/" + r.Namespace + "/" + r.Name
}

// key identifies the object regardless of its API version.
func (r ObjRef) key() string { return r.Group + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name }

func refOf(u *unstructured.Unstructured) ObjRef {
	gvk := u.GroupVersionKind()
	return ObjRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// mapping resolves an object's resource and scope, defaulting a namespaced object
// without a namespace to "default" as kubectl does.
func (d *Deployer) mapping(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		d.mapper.Reset()
		m, err = d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("the API server serves no %s in %s (is its CustomResourceDefinition installed?)", gvk.Kind, gvk.GroupVersion())
		}
		return nil, fmt.Errorf("map %s: %w", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(metav1.NamespaceDefault)
		}
		return d.dyn.Resource(m.Resource).Namespace(u.GetNamespace()), nil
	}
	u.SetNamespace("")
	return d.dyn.Resource(m.Resource), nil
}

func (d *Deployer) resourceFor(r ObjRef) (dynamic.ResourceInterface, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind})
	u.SetNamespace(r.Namespace)
	u.SetName(r.Name)
	return d.mapping(u)
}

func sortedRefs(refs []ObjRef) []ObjRef {
	slices.SortFunc(refs, func(a, b ObjRef) int { return strings.Compare(a.key(), b.key()) })
	return refs
}
