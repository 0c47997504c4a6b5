package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/internal/redact"
	"github.com/kubeplug/kubeplug/pkg/deploy/crd"
	"github.com/kubeplug/kubeplug/pkg/deploy/drift"
	"github.com/kubeplug/kubeplug/pkg/deploy/helm"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/seal"
	"github.com/kubeplug/kubeplug/pkg/deploy/ssa"
	"github.com/kubeplug/kubeplug/pkg/deploy/state"
	"github.com/kubeplug/kubeplug/pkg/serving"
)

// FieldManager is the server-side apply field manager of everything kubeplug applies.
const FieldManager = kube.FieldManager

// HelmFieldManager is the field manager of what the Helm SDK applies for kubeplug.
const HelmFieldManager = helm.HelmFieldManager

// Labels of kubeplug's objects: LabelPlugin is on every object kubeplug
// applies; LabelManagedBy on what it keeps for itself (its records).
const (
	LabelManagedBy = kube.LabelManagedBy
	LabelPlugin    = kube.LabelPlugin
)

// AnnotationDigest is where earlier kubeplugs kept the digest of the content
// they last applied to an object; the release record keeps it now, and the
// annotation is removed from an object at its next apply.
const AnnotationDigest = ssa.AnnotationDigest

// The vocabulary of a Deployer's inputs and results is defined by the packages
// that own it; these names let its callers use one import.
type (
	// ObjRef identifies an object across versions of its API.
	ObjRef = kube.ObjRef
	// ReleaseRef names a Helm release in an inventory.
	ReleaseRef = kube.ReleaseRef
	// UnitError is one plugin's failure in a wave.
	UnitError = kube.UnitError
	// Record is one revision of a plugin's release record.
	Record = state.Record
	// HelmRelease is a Helm release a plugin installs.
	HelmRelease = helm.Release
	// HealthCheck is a plugin's readiness condition for one kind.
	HealthCheck = ssa.HealthCheck
	// DriftIgnore names fields of a plugin's objects that others may change.
	DriftIgnore = ssa.Ignore
	// PluginDrift is how a plugin's objects in the cluster differ from what an
	// apply would make them.
	PluginDrift = drift.PluginDrift
	// ObjectDrift is one drifted object.
	ObjectDrift = drift.ObjectDrift
	// FieldDrift is one field that differs.
	FieldDrift = drift.FieldDrift
)

// Phases of a release record.
const (
	PhaseApplying    = state.PhaseApplying
	PhaseReady       = state.PhaseReady
	PhaseFailed      = state.PhaseFailed
	PhaseSuperseded  = state.PhaseSuperseded
	PhaseInterrupted = state.PhaseInterrupted
)

// RedactedValue stands for the values of a drifted Secret field.
const RedactedValue = drift.RedactedValue

// Errors a Deployer returns, matched with errors.Is.
var (
	// ErrNoObjects: a revision's objects were not recorded (one migrated from an
	// older kubeplug's inventory), so it cannot be restored.
	ErrNoObjects = state.ErrNoObjects
	// ErrUnsafeCRDChange: a plugin's new CustomResourceDefinitions would break
	// objects or clients of the old ones.
	ErrUnsafeCRDChange = crd.ErrUnsafeCRDChange
)

// CompileHealth checks that a health expression is valid CEL yielding a bool.
var CompileHealth = ssa.CompileHealth

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
	// Store keeps the release records. Default: Secrets in Namespace of the
	// cluster deployed to (state.Secrets).
	Store state.Store
	// Owner is recorded as the Owner of every revision this Deployer writes (see
	// state.Record.Owner): empty for the CLI, the PluginInstallation for the
	// controller.
	Owner string
	// AnyOwner lets Uninstall remove plugins whatever owner manages them (kubeplug
	// down, which removes the cluster's plugins before it stops the cluster).
	AnyOwner bool
	// Adopt lets a Deployer with an Owner take over plugins the CLI installed
	// (recorded without an owner). Without it, they are refused with an
	// *OwnerError: an installation never takes the CLI's plugins silently. The
	// CLI (no Owner) applies its own plugins whatever Adopt says.
	Adopt bool
	// Remedies name, in the words of whoever drives the Deployer, how a user
	// allows what a refusal refuses. Zero fields take the CLI's flags.
	Remedies Remedies
	// Sensitive are the values sealed (package seal) wherever a release record
	// would hold them: kubeplug's records in Secrets and Helm's. Values a
	// record reveals when it is read (a rollback's) are added to it.
	Sensitive *redact.Secrets
	// Client, when set, is the client the Deployer uses instead of making one
	// from cfg: a controller that applies to one cluster many times shares its
	// connections and discovery cache.
	Client *kube.Client
	// Heads, when set, is the record heads shared by the Deployers of runs
	// against the same cluster (state.Heads): a controller's applies read them
	// without listing them each. Its holder invalidates it whenever another
	// writer may have written. Ignored with a Store.
	Heads *state.Heads
	// ServingCerts says how long the serving CAs and certificates of plugins'
	// APIs and webhooks live (serving.Inject); zero fields take its defaults.
	ServingCerts serving.Policy
}

// Remedies say how a refused change is allowed, as the Deployer's caller lets its
// user allow it: the CLI by a flag, the controller by a field of the
// installation. Each is the end of a sentence, "... <remedy> if ...".
type Remedies struct {
	// AllowDowngrade allows applying a lower plugin version. Default "apply
	// with --allow-downgrade".
	AllowDowngrade string
	// Adopt takes over a plugin the CLI installed (Options.Adopt), for a
	// Deployer with an Owner. Default: none is named.
	Adopt string
}

func (o *Options) defaults() {
	if o.Remedies.AllowDowngrade == "" {
		o.Remedies.AllowDowngrade = "apply with --allow-downgrade"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Events == nil {
		o.Events = func(Event) {}
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 32
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
}

// Deployer applies, waits for, records, prunes and uninstalls plugins' content.
// It composes the deploy subpackages: ssa for objects, helm for Helm releases,
// crd for CRD safety, drift for drift, state for the release records.
type Deployer struct {
	opts   Options
	kc     *kube.Client
	store  state.Store
	ssa    *ssa.Applier
	helm   *helm.Manager
	drift  *drift.Detector
	events sync.Mutex

	// nsReady is set once the records' namespace is known to exist; nsMu keeps
	// units begun at once from each creating it.
	nsReady atomic.Bool
	nsMu    sync.Mutex
	// hist holds the histories CheckDowngrades read at the run's start, for the
	// waves of the same run: each plugin's is used once (by the wave that applies
	// it), after which the store is read again; a plugin without an entry was not
	// installed. nil when nothing was read ahead. The operation lease keeps other
	// writers out while a run holds it; a Deployer is one run's.
	// histAll says hist holds every plugin's; else it holds those of the
	// plugins histNamed names and the owner's (state.OwnedHistories), and
	// another plugin without an entry is read from the store.
	histMu    sync.Mutex
	hist      map[string][]*state.Record
	histUsed  map[string]bool
	histAll   bool
	histNamed []string
}

// history returns a plugin's newest revision and its history: from what the
// run read at its start when it has it, else from the store.
func (d *Deployer) history(ctx context.Context, plugin string) (*state.Record, []*state.Record, error) {
	d.histMu.Lock()
	if _, had := d.hist[plugin]; d.hist != nil && !d.histUsed[plugin] && (had || d.histAll || slices.Contains(d.histNamed, plugin)) {
		d.histUsed[plugin] = true
		h := d.hist[plugin]
		d.histMu.Unlock()
		if len(h) == 0 {
			return nil, nil, nil
		}
		return h[len(h)-1], h, nil
	}
	d.histMu.Unlock()
	return state.Latest(ctx, d.store, plugin)
}

// readAhead reads at once the histories of plugins and of the owner's (when
// the store can read those only), else every plugin's (when it can), for
// history to serve; ok is false when it cannot.
func (d *Deployer) readAhead(ctx context.Context, plugins []string) (hs map[string][]*state.Record, ok bool, err error) {
	some, can := d.store.(state.OwnedHistories)
	all, canAll := d.store.(state.AllHistories)
	switch {
	case can:
		hs, err = some.HistoriesFor(ctx, d.opts.Owner, plugins)
	case canAll:
		hs, err = all.Histories(ctx)
	default:
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	d.histMu.Lock()
	d.hist, d.histUsed, d.histAll, d.histNamed = hs, map[string]bool{}, !can, plugins
	d.histMu.Unlock()
	return hs, true, nil
}

// New returns a Deployer for the cluster cfg points at. It does not contact the
// cluster.
func New(cfg *rest.Config, opts Options) (*Deployer, error) {
	d := &Deployer{}
	var retrying func(kube.RetryInfo)
	if opts.Events != nil {
		// Retries become events, instead of the client's log warning.
		retrying = d.retrying
	}
	opts.defaults()
	kc := opts.Client
	if kc == nil {
		var err error
		if kc, err = kube.New(cfg, kube.Options{Logger: opts.Logger, QPS: opts.QPS, Burst: opts.Burst, Retry: opts.Retry, Retrying: retrying}); err != nil {
			return nil, err
		}
	}
	d.opts, d.kc, d.store = opts, kc, opts.Store
	sealer := seal.New(seal.SecretKeys(kc, opts.Namespace), opts.Sensitive, "Secret "+opts.Namespace+"/"+seal.KeySecret)
	if d.store == nil {
		st := state.NewSecrets(kc, opts.Namespace, opts.HistoryMax)
		st.SetSealer(sealer)
		st.ShareHeads(opts.Heads)
		d.store = st
	}
	d.ssa = ssa.New(kc, ssa.Options{Concurrency: opts.Concurrency, Timeout: opts.Timeout, DryRun: opts.DryRun, ForceConflicts: opts.ForceConflicts})
	d.helm = helm.New(kc, helm.Options{Logger: opts.Logger, Timeout: opts.Timeout, DryRun: opts.DryRun, ForceConflicts: opts.ForceConflicts, RollbackOnFailure: opts.RollbackOnFailure, Sealer: sealer})
	d.drift = drift.New(kc, d.ssa, opts.Concurrency)
	return d, nil
}

// Client is the clients the deployer talks to its cluster through, for what
// works beside it on the same cluster (the operation lease).
func (d *Deployer) Client() *kube.Client { return d.kc }

// Namespace is the namespace of kubeplug's own objects (release records, the
// operation lease).
func (d *Deployer) Namespace() string { return d.opts.Namespace }

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
	// Machine is what the plugin contributed outside Kubernetes objects, as
	// state.Record.Machine records it.
	Machine []string
	Objects []*unstructured.Unstructured
	// Releases are installed through the Helm SDK after Objects are applied; their
	// objects are waited for and recorded with the plugin's.
	Releases []HelmRelease
	// Health adds conditions to readiness: an object of a kind a check names is ready
	// only when kstatus says Current and the check's expression holds.
	Health []HealthCheck
	// DriftIgnore names fields of the plugin's objects that others may change
	// (an autoscaler's /spec/replicas): not drift, and no reason to re-apply.
	DriftIgnore []DriftIgnore
	// Priority orders the applies of units applied at once (ApplyUnit): when
	// the pipe is full, an object of the unit of the highest priority goes
	// first. A scheduler gives it to the plugins others wait for, by how long
	// a chain of plugins waits on each, so that their dependents start sooner.
	// It changes no order the plan sets: a unit starts only when those it
	// waits for are ready.
	Priority int

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

// Report sends e to Options.Events like the Deployer's own events, stamped with
// the time: for what its caller does around a deploy, such as waiting for the
// cluster's operation lease.
func (d *Deployer) Report(e Event) { d.emit(e) }

// retrying turns the client's retries into events.
func (d *Deployer) retrying(ri kube.RetryInfo) {
	e := Event{Type: APIRetrying, Server: ri.Server, Attempt: ri.Attempt, Attempts: ri.Attempts}
	switch {
	case ri.Done && ri.Err == nil:
		e.Type, e.Message = APIRetried, "answered"
	case ri.Done:
		e.Type, e.Message = APIRetried, "gave up: "+brief(ri.Err)
	default:
		e.Message = brief(ri.Err)
	}
	d.emit(e)
}

// brief is err's first line, cut to 200 bytes: a progress line, not the whole
// health report a starting API server answers with.
func brief(err error) string {
	s, _, cut := strings.Cut(err.Error(), "\n")
	if len(s) > 200 {
		s, cut = strings.ToValidUTF8(s[:200], ""), true
	}
	if cut {
		s += "…"
	}
	return s
}

// Ping checks that the API server answers, retrying transient failures with
// backoff, so an unreachable cluster is one clear error rather than a failure per
// object.
func (d *Deployer) Ping(ctx context.Context) error { return d.kc.Ping(ctx) }

// ServerVersion is the cluster's Kubernetes version as its API server reports it
// (for example v1.37.1).
func (d *Deployer) ServerVersion(ctx context.Context) (string, error) { return d.kc.ServerVersion(ctx) }

// Inventories returns every installed plugin's newest release record, by plugin
// name; plugins an older kubeplug installed come from their ConfigMap inventories.
func (d *Deployer) Inventories(ctx context.Context) ([]*Record, error) {
	return d.store.Latest(ctx)
}

// Drift compares each unit's desired objects with the cluster (see drift.Detector):
// one entry per unit, in the units' order; the error joins one *UnitError per
// object that could not be compared. Helm releases' objects are not compared.
func (d *Deployer) Drift(ctx context.Context, units []Unit) ([]PluginDrift, error) {
	plugins := make([]drift.Plugin, len(units))
	for i, u := range units {
		plugins[i] = drift.Plugin{Name: u.Plugin, Objects: u.Objects, Ignore: u.DriftIgnore}
	}
	return d.drift.Detect(ctx, plugins)
}

// liveSecret reads a Secret for serving.Inject: nil when there is none.
func (d *Deployer) liveSecret(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error) {
	ri, err := d.kc.ResourceFor(kube.ObjRef{Version: "v1", Kind: "Secret", Namespace: namespace, Name: name})
	if err != nil {
		return nil, err
	}
	var got *unstructured.Unstructured
	err = d.kc.Retry(ctx, func(ctx context.Context) error {
		var err error
		got, err = ri.Get(ctx, name, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return got, err
}

// refuseTakenGroups refuses a unit's APIService for a group version the
// cluster already serves otherwise: by the API server itself (a built-in group,
// or a CustomResourceDefinition's), or through an APIService another plugin or
// someone else applied. Server-side apply would take it over and send the
// group's requests to this plugin.
func (d *Deployer) refuseTakenGroups(ctx context.Context, u Unit) error {
	for _, o := range u.Objects {
		if o.GetKind() != "APIService" || o.GroupVersionKind().Group != "apiregistration.k8s.io" {
			continue
		}
		ri, err := d.kc.Resource(o)
		if err != nil {
			return err
		}
		var live *unstructured.Unstructured
		err = d.kc.Retry(ctx, func(ctx context.Context) error {
			var err error
			live, err = ri.Get(ctx, o.GetName(), metav1.GetOptions{})
			return err
		})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read APIService %s: %w", o.GetName(), err)
		}
		owner := live.GetLabels()[kube.LabelPlugin]
		if owner == u.Plugin {
			continue
		}
		if svc, ok, _ := unstructured.NestedMap(live.Object, "spec", "service"); !ok || svc == nil {
			return fmt.Errorf("APIService %s: the API server already serves this group version itself (a built-in API or a CustomResourceDefinition); a plugin cannot take it over", o.GetName())
		}
		if owner != "" {
			return fmt.Errorf("APIService %s: plugin %s already serves this group version", o.GetName(), owner)
		}
		return fmt.Errorf("APIService %s: already exists and was not applied by kubeplug; delete it first if this plugin is to serve the group", o.GetName())
	}
	return nil
}

// DiscoveryProblems names the API group versions the cluster's discovery could
// not list — an aggregated API whose server is down — with why. kubeplug works
// on without them (its mapping uses what discovery did list); callers report
// them so that a missing kind is not a mystery.
func (d *Deployer) DiscoveryProblems() []string {
	// The client's discovery: what it reads here, its mapping need not read
	// again. A failure it kept from earlier (a client shared across runs) is
	// looked at afresh.
	var failed *discovery.ErrGroupDiscoveryFailed
	for fresh := false; ; fresh = true {
		_, _, err := d.kc.Discovery.ServerGroupsAndResources()
		if !errors.As(err, &failed) {
			return nil
		}
		if fresh {
			break
		}
		d.kc.ResetMappings()
	}
	var out []string
	for gv, e := range failed.Groups {
		out = append(out, gv.String()+": "+e.Error())
	}
	slices.Sort(out)
	return out
}
