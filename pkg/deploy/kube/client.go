package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// FieldManager is the server-side apply field manager of everything kubeplug applies.
const FieldManager = "kubeplug"

// Labels of kubeplug's objects: LabelPlugin is the one label on every object
// kubeplug applies for a plugin (its plugin's name); LabelManagedBy marks what
// kubeplug keeps for itself (its records, its lease, its namespace).
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelPlugin    = "kubeplug.dev/plugin"
)

// DefaultRetry is how transient API errors are retried unless Options.Retry says
// otherwise: 9 tries, from 200ms doubling to 5s (about 20s: long enough for an API
// server to restart).
var DefaultRetry = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: 9}

// Options configure a Client. The zero value of each field means its default.
type Options struct {
	// Logger receives retries at debug level, and a warning (at most every 5 s)
	// when requests are being retried unless Retrying is set; discarded when nil.
	Logger *slog.Logger
	// QPS and Burst of the clients. Defaults 500 and 1000: a local API server handles
	// far more than client-go's defaults of 5 and 10.
	QPS   float32
	Burst int
	// Retry is how transient API errors (unreachable server, throttling, timeouts)
	// are retried. Default DefaultRetry.
	Retry wait.Backoff
	// Retrying, when set, is told of retries instead of the warning the Logger
	// gets: at most once a second for the whole client while requests fail with
	// transient errors (and always on a request's last try), then once when a
	// request told of ends, answered or not. It is called from the retrying
	// goroutine and must not block.
	Retrying func(RetryInfo)
}

// RetryInfo describes a request being retried (Options.Retrying).
type RetryInfo struct {
	// Server is the API server's URL.
	Server string
	// Attempt is the try that failed (from 1), of at most Attempts.
	Attempt, Attempts int
	// Err is the transient error of that try; on the last call for a request,
	// nil when it was answered.
	Err error
	// Done says the retries ended: the server answered, a try failed for good, or
	// the tries ran out.
	Done bool
}

// Client is the clients of one cluster and the policy to retry them. It is safe
// for concurrent use.
type Client struct {
	// Config is the REST config the clients were made from (QPS, burst and user
	// agent set), for clients made later (Helm's, the metadata client).
	Config  *rest.Config
	Dynamic dynamic.Interface
	// Core is the typed client of the built-in kinds; it speaks protobuf.
	Core kubernetes.Interface
	// Metadata reads objects' metadata only (PartialObjectMetadata, protobuf).
	Metadata metadata.Interface
	// Discovery is what the API server serves, read once and kept until
	// ResetMappings.
	Discovery discovery.CachedDiscoveryInterface
	// Mapper maps kinds to resources, from Discovery. Use Mapping, which caches
	// its answers, and ResetMappings, which forgets them too.
	Mapper *restmapper.DeferredDiscoveryRESTMapper
	Logger *slog.Logger
	retry  wait.Backoff
	// told is when the last retry warning was logged (UnixNano).
	told atomic.Int64
	// retrying is Options.Retrying; reported is when it was last told of a
	// failed try (UnixNano).
	retrying func(RetryInfo)
	reported atomic.Int64
	// mappings caches Mapping's answers by kind (schema.GroupVersionKind →
	// *meta.RESTMapping): the mapper walks everything discovery listed, under a
	// lock, on every call. missing holds kinds found missing just after a reset
	// (→ missingAt), so that a thousand objects of a kind whose definition is not
	// applied yet cost one new discovery, not a thousand. gen counts resets.
	mappings sync.Map
	missing  sync.Map
	gen      atomic.Uint64
	resetMu  sync.Mutex
	// ensured holds the namespaces EnsureNamespace made sure of (→ time.Time).
	ensured sync.Map
}

// missingAt is when, and after which reset, a kind was found missing.
type missingAt struct {
	gen uint64
	at  time.Time
}

// missingFor is how long a kind found missing right after a reset is believed
// missing without another reset (unless ResetMappings is called meanwhile).
const missingFor = 2 * time.Second

// New returns a Client for the cluster cfg points at. It does not contact the
// cluster.
func New(cfg *rest.Config, opts Options) (*Client, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.QPS <= 0 {
		opts.QPS = 500
	}
	if opts.Burst <= 0 {
		opts.Burst = 1000
	}
	if opts.Retry.Steps == 0 {
		opts.Retry = DefaultRetry
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	cfg.UserAgent = "kubeplug"
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create a dynamic client: %w", err)
	}
	// The typed client reads and writes only built-in kinds, all of which speak
	// protobuf: far cheaper to decode than JSON (release records are large).
	pcfg := rest.CopyConfig(cfg)
	pcfg.ContentType = runtime.ContentTypeProtobuf
	pcfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	core, err := kubernetes.NewForConfig(pcfg)
	if err != nil {
		return nil, fmt.Errorf("create a client: %w", err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create a metadata client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create a discovery client: %w", err)
	}
	cached := memory.NewMemCacheClient(dc)
	return &Client{
		Config: cfg, Dynamic: dyn, Core: core, Metadata: md, Logger: opts.Logger, retry: opts.Retry, retrying: opts.Retrying,
		Discovery: cached, Mapper: restmapper.NewDeferredDiscoveryRESTMapper(cached),
	}, nil
}

// Ping checks that the API server answers, retrying transient failures with
// backoff, so an unreachable cluster is one clear error rather than a failure per
// object.
//
// At the address client-go falls back to when no server is configured
// (clientcmd.ClusterDefaults, http://localhost:8080), a refused connection is
// not retried: nothing is starting there, the kubeconfig names no cluster.
func (c *Client) Ping(ctx context.Context) error {
	probe := func(ctx context.Context) error {
		_, err := c.Core.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}
	if c.Config.Host == clientcmd.ClusterDefaults.Server {
		err := probe(ctx)
		if err == nil {
			return nil
		}
		if strings.Contains(err.Error(), "connection refused") {
			return fmt.Errorf("nothing answers at %s, the address used when no kubeconfig names a server (give --kubeconfig, --context or --server): %w", c.Config.Host, err)
		}
	}
	return c.Retry(ctx, probe)
}

// ServerVersion is the API server's version, as /version reports it.
func (c *Client) ServerVersion(ctx context.Context) (string, error) {
	var v string
	err := c.Retry(ctx, func(ctx context.Context) error {
		info, err := discovery.ToServerVersionInterfaceWithContext(c.Core.Discovery()).ServerVersionWithContext(ctx)
		if err == nil {
			v = info.GitVersion
		}
		return err
	})
	return v, err
}

// Retry runs fn until it succeeds, fails with an error that is not transient, or
// the tries run out; then the error says how many tries were made. The pause
// between tries grows by the backoff's Factor up to its Cap and stays there:
// unlike wait.Backoff's own stepping, reaching the cap does not end the tries,
// so that DefaultRetry's 9 tries last the ~20 s an API server takes to restart.
func (c *Client) Retry(ctx context.Context, fn func(context.Context) error) error {
	b := c.retry
	limit, maxPause := b.Steps, b.Cap
	b.Cap = 0 // capped below, without wait.Backoff zeroing the steps
	var err error
	tries := 0
	told := false // Options.Retrying was told of this request
	for {
		err = fn(ctx)
		tries++
		if err == nil || !Transient(err) {
			break
		}
		c.Logger.Debug("retrying after a transient error", "error", err)
		switch {
		case c.retrying != nil:
			if tries == limit || c.shouldReport() {
				told = true
				c.retrying(RetryInfo{Server: c.Config.Host, Attempt: tries, Attempts: limit, Err: err})
			}
		case tries == 2 && c.shouldTell():
			// Not in silence: the retries can take ~20 s.
			c.Logger.Warn("the API server does not answer; retrying", "error", err, "tries", limit)
		}
		if tries >= limit {
			err = fmt.Errorf("the API server did not answer after %d tries: %w", tries, err)
			break
		}
		pause := b.Step()
		if maxPause > 0 {
			pause = min(pause, maxPause)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			err = fmt.Errorf("%w while retrying a request the API server did not answer: %w", context.Cause(ctx), err)
		case <-t.C:
			continue
		}
		break
	}
	if told {
		c.retrying(RetryInfo{Server: c.Config.Host, Attempt: tries, Attempts: limit, Err: err, Done: true})
	}
	return err
}

// shouldReport rate-limits Options.Retrying across the client's concurrent
// requests: at most once a second.
func (c *Client) shouldReport() bool {
	now := time.Now().UnixNano()
	last := c.reported.Load()
	return now-last >= int64(time.Second) && c.reported.CompareAndSwap(last, now)
}

// shouldTell rate-limits the warning about retries across the client's
// concurrent requests: at most one every 5 seconds.
func (c *Client) shouldTell() bool {
	now := time.Now().UnixNano()
	last := c.told.Load()
	return now-last >= int64(5*time.Second) && c.told.CompareAndSwap(last, now)
}

// Transient reports whether err is worth retrying: the server was unreachable,
// overloaded or timed out. A refusal of the credentials (401, 403) is an answer,
// never transient, even when its body is no Status (as from /version, which
// client-go then reports as an unexpected server response).
func Transient(err error) bool {
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		return false
	}
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

// ErrNoKind is wrapped by Resource when the API server serves no such kind.
var ErrNoKind = errors.New("the API server serves no such kind")

// noKindError names the missing kind and is ErrNoKind.
type noKindError struct{ gvk schema.GroupVersionKind }

func (e *noKindError) Error() string {
	return fmt.Sprintf("the API server serves no %s in %s (is its CustomResourceDefinition installed?)", e.gvk.Kind, e.gvk.GroupVersion())
}

func (e *noKindError) Is(target error) bool { return target == ErrNoKind }

// Resource resolves an object's resource and scope, defaulting a namespaced object
// without a namespace to "default" as kubectl does (and clearing the namespace of
// a cluster-scoped one). A kind the server does not serve is an ErrNoKind error.
func (c *Client) Resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	m, err := c.Mapping(u.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(metav1.NamespaceDefault)
		}
		return c.Dynamic.Resource(m.Resource).Namespace(u.GetNamespace()), nil
	}
	u.SetNamespace("")
	return c.Dynamic.Resource(m.Resource), nil
}

// Mapping maps a kind to its resource and scope, from a cache of earlier
// answers. A kind discovery did not list is looked for again after a new
// discovery (a CRD may have been applied since): once, for every caller that
// asks meanwhile. A kind the server does not serve is an ErrNoKind error.
func (c *Client) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	if m, ok := c.mappings.Load(gvk); ok {
		return m.(*meta.RESTMapping), nil
	}
	gen := c.gen.Load()
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		reset := c.resetAfterMiss(gvk, gen)
		m, err = c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if reset != 0 && meta.IsNoMatchError(err) {
			c.missing.Store(gvk, missingAt{gen: reset, at: time.Now()})
		}
	}
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, &noKindError{gvk: gvk}
		}
		return nil, fmt.Errorf("map %s: %w", gvk, err)
	}
	c.mappings.Store(gvk, m)
	return m, nil
}

// Maps says whether the kind is served as far as discovery last said: Mapping
// without a new discovery for a kind it did not list.
func (c *Client) Maps(gvk schema.GroupVersionKind) bool {
	if _, ok := c.mappings.Load(gvk); ok {
		return true
	}
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false
	}
	c.mappings.Store(gvk, m)
	return true
}

// resetAfterMiss forgets what discovery said, for a kind not found in what it
// said at reset generation gen, and returns the new generation: unless another
// caller has reset since, or the kind was found missing right after the newest
// reset (then it returns 0).
func (c *Client) resetAfterMiss(gvk schema.GroupVersionKind, gen uint64) uint64 {
	c.resetMu.Lock()
	defer c.resetMu.Unlock()
	now := c.gen.Load()
	if now != gen {
		return 0 // reset meanwhile: look again in the new discovery
	}
	if v, ok := c.missing.Load(gvk); ok {
		if m := v.(missingAt); m.gen == now && time.Since(m.at) < missingFor {
			return 0
		}
	}
	// Marked missing at the new generation now, before the new discovery
	// answers: a caller that misses meanwhile waits on that discovery rather
	// than starting another.
	next := c.resetLocked()
	c.missing.Store(gvk, missingAt{gen: next, at: time.Now()})
	return next
}

// ResetMappings forgets every mapping and what discovery said, so that kinds
// served since (a wave's CustomResourceDefinitions) are found.
func (c *Client) ResetMappings() {
	c.resetMu.Lock()
	defer c.resetMu.Unlock()
	_ = c.resetLocked()
}

func (c *Client) resetLocked() uint64 {
	c.Mapper.Reset()
	c.mappings.Clear()
	c.missing.Clear()
	return c.gen.Add(1)
}

// ResourceFor is Resource for a reference.
func (c *Client) ResourceFor(r ObjRef) (dynamic.ResourceInterface, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind})
	u.SetNamespace(r.Namespace)
	u.SetName(r.Name)
	return c.Resource(u)
}

// ensuredFor is how long EnsureNamespace trusts that a namespace it made sure
// of still exists: a run's lease and its records ask for the same one.
const ensuredFor = time.Minute

// EnsureNamespace creates the namespace kubeplug keeps its own objects in (release
// records, the operation lease) when it does not exist. A namespace it made sure
// of, or was told exists (NamespaceExists), in the last minute is not asked for
// again.
func (c *Client) EnsureNamespace(ctx context.Context, name string) error {
	if at, ok := c.ensured.Load(name); ok && time.Since(at.(time.Time)) < ensuredFor {
		return nil
	}
	err := c.Retry(ctx, func(ctx context.Context) error {
		_, err := c.Core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{LabelManagedBy: FieldManager},
		}}, metav1.CreateOptions{FieldManager: FieldManager})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err == nil {
		c.ensured.Store(name, time.Now())
	}
	return err
}

// NamespaceExists tells the client that namespace name exists, as an object
// just read in it shows: EnsureNamespace then asks nothing for a minute. The
// operation lease, read at every run's start, saves a create of kubeplug's
// namespace that would only find it there.
func (c *Client) NamespaceExists(name string) { c.ensured.Store(name, time.Now()) }
