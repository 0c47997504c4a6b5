package provider

import (
	"context"
	"errors"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// Desired is the state a provider brings machines and the control plane to: the
// model after the render stage (control-plane flags, feature gates, volumes;
// node pools with count, role, labels, taints, files, systemd units, hooks) and
// the rendered machines.
type Desired struct {
	ClusterName       string
	KubernetesVersion string
	// Model is the finished model after the render stage; read, never modified.
	Model *model.Model
	// Machines are the rendered machines by pool name (render.Machines),
	// the control-plane pseudo pool included.
	Machines map[string]*render.Machine
	// Files are the rendered files (render.Files) for a provider that deploys
	// them (FileDeployer); nil for the others.
	Files map[string][]byte
	// Sensitive are the plugins' sensitive values (their spec.values.sensitive
	// pointers) by plugin, for a provider whose files leave this machine in
	// clear (the aws provider's user data), which refuses a file holding one.
	Sensitive map[string][]string
	// Skip names the creation steps (Steps, without StepPrefix) the site
	// provides itself, each with the expansion that says so. Only Skippable
	// steps are named; a provider that runs steps as data (the local one)
	// skips them and says so in an Event, the others ignore it.
	Skip map[string]string
	// Site is set when the run uses expansions (an air-gapped site,
	// docs/expansions.md): what the cluster needs comes from them and the
	// site registry, never from the internet. Nil without expansions. The
	// local provider loads the expansions' images into its own registry
	// (ImageLoader) and ignores it; the hosts provider points the hosts'
	// container runtime at the site registry, and refuses what a host would
	// fetch from the internet.
	Site *Site
}

// Site is where an air-gapped site's cluster gets what it needs.
type Site struct {
	// Expansions name the expansions the run uses, for messages
	// ("site 1.0.0 from exp/site.tar").
	Expansions []string
	// Images are the images the expansions carry (their own names).
	Images []string
	// Registry is host:port of the site registry (--site-registry): every
	// image of the rendered objects was rewritten to it, and the
	// expansions' images pushed there. Empty without one.
	Registry string
	// PlainHTTP says the registry speaks plain HTTP (--site-registry-plain-http);
	// else HTTPS, trusted through the nodes' own certificate store.
	PlainHTTP bool
}

// Event is a step of progress, for the user: "starting kube-apiserver",
// "node workers-0: beforeNodeup 3 hooks ok", "node workers-1 Ready".
type Event struct {
	Time time.Time
	// Step is a short constant naming what happens: "control-plane", "node", "hooks", ...
	Step string
	// Node is the node the event is about, empty for the cluster.
	Node    string
	Message string
	// Item names what of a step the event is about when the step works on
	// several things at once (a control-plane component, an image), so a live
	// display can show each; empty for the step itself.
	Item string
	// Done says the item (or the step) is finished: a display shows it no
	// longer as in progress.
	Done bool
	// Complete and Total count the bytes of a transfer (an image push) when
	// known; an event with Total set and Done unset only updates the count.
	Complete, Total int64
}

// Provider brings a cluster to a Desired state and tears it down.
//
// Cancelling a method's context stops it as soon as possible (running hooks get
// SIGTERM, then SIGKILL) and leaves the state consistent: the next Up continues
// where this one stopped.
type Provider interface {
	// Up brings the control plane and node pools to d and returns when the API
	// server is ready and every node of every pool ran beforeNodeup, joined
	// (Ready) and ran afterNodeup. Idempotent: on a running cluster it applies
	// the difference (restarts only components whose flags, gates or volumes
	// changed, adds and removes nodes, re-runs hooks whose definitions changed
	// per the node agent's own state rules). A node whose enforced hook fails
	// does not join; the error names the node, hook, plugin and phase. The
	// returned Running is valid also with such an error, when the control
	// plane runs.
	Up(ctx context.Context, d *Desired) (*Running, error)
	// AfterDeploy runs every node's afterDeploy hooks. An enforced failure is an
	// error naming the node and hook; the other nodes still run theirs.
	AfterDeploy(ctx context.Context) error
	// Down stops the control plane and nodes; purge also deletes the state dir.
	// Down on a cluster that is not running says so (an error wrapping
	// ErrNotRunning) and touches nothing outside the state dir.
	Down(ctx context.Context, purge bool) error
}

// Running is a cluster a provider brought up: where it is and what Up did.
type Running struct {
	// Kubeconfig is the path of a cluster-admin kubeconfig file in the state dir.
	Kubeconfig string
	// RESTConfig reaches the cluster's API server. It is nil when the provider
	// deployed the cluster's machines but cannot reach their API server itself
	// (the aws provider); up then
	// runs no step that needs the cluster and says so.
	RESTConfig *rest.Config
	// Deployed is what the provider deployed to a cloud (stacks, outputs,
	// uploaded files); nil for providers that deploy nothing there. Up puts it in
	// the model (model.Model.Deployed).
	Deployed *model.Deployed
	// Nodes in name order.
	Nodes []NodeStatus
	// Restarted are the control-plane components this Up restarted because
	// their configuration changed; empty on a fresh start and on a no-op Up.
	Restarted []string
	// Started is true when this Up started the control plane (it was not running).
	Started bool
}

// NodeStatus is one node after Up.
type NodeStatus struct {
	Name, Pool, Role string
	// Ready is whether the Node joined and is Ready.
	Ready bool
	// Hooks summarises each phase that ran on the node in this Up, by phase.
	Hooks map[string]HookSummary
}

// HookSummary counts what became of a phase's hooks on one node.
type HookSummary struct {
	// Succeeded ran and succeeded now; Skipped succeeded earlier or their
	// condition was false; Failed failed (enforced or not); NotRun did not start.
	Succeeded, Skipped, Failed, NotRun int
	// Failures describe each failed hook, "plugin/hook: reason".
	Failures []string
}

// Sentinel errors; match them with errors.Is.
var (
	// ErrNotRunning means the cluster is not running (Down, get-kubeconfig).
	ErrNotRunning = errors.New("cluster is not running")
	// ErrIncompatibleState means the state dir was written by an incompatible
	// version of kubeplug; `kubeplug down --purge` removes it.
	ErrIncompatibleState = errors.New("state directory written by an incompatible kubeplug")
	// ErrHookFailed means an enforced node hook failed; the node did not join
	// (beforeNodeup) or the phase failed.
	ErrHookFailed = errors.New("node hook failed")
	// ErrUnsupportedVersion means the provider cannot run the cluster's
	// spec.kubernetesVersion; the error names the versions it can run. Nothing
	// was started.
	ErrUnsupportedVersion = errors.New("unsupported Kubernetes version")
	// ErrBusy means another kubeplug run held the cluster's lock for as long
	// as Locker.Lock was to wait; nothing was changed.
	ErrBusy = errors.New("another kubeplug is working on the cluster")
)

// Locker is implemented by a provider that keeps two kubeplug runs on this
// machine from working on one cluster at once (the local provider's state
// directory). Up takes the lock for its whole run, so that a second up waits
// for the first to finish, as apply waits for the cluster's operation lease.
type Locker interface {
	// Lock takes the cluster's lock for the operation op ("up"), waiting up to
	// wait while another run holds it; waiting, when set, is told who holds it
	// ("pid 1234", and its operation) when the wait starts and every 10 s.
	// The error wraps ErrBusy when the wait runs out, and ctx's error when ctx
	// ends first. Until unlock is called, the provider's own methods work
	// under this lock and do not take it again; unlock must be called once.
	Lock(ctx context.Context, op string, wait time.Duration, waiting func(holder, op string, waited time.Duration)) (unlock func(), err error)
}

// Locator is implemented by a provider that can find the cluster it brought up
// without changing anything: down uninstalls the plugins of a running cluster
// first, get-kubeconfig prints where it is.
type Locator interface {
	// Locate returns the path of a cluster-admin kubeconfig of the running
	// cluster. It returns an error wrapping ErrNotRunning when the cluster does
	// not run, and one wrapping ErrIncompatibleState when its state cannot be read.
	Locate(ctx context.Context) (kubeconfig string, err error)
}

// Stateful is implemented by a provider that keeps a cluster's state in a
// directory on this machine.
type Stateful interface {
	// StateDir is the absolute path of the cluster's state directory.
	StateDir() string
}

// VersionChecker is implemented by a provider that can run only some Kubernetes
// versions; up asks it before anything resolves.
type VersionChecker interface {
	// CheckKubernetesVersion returns an error wrapping ErrUnsupportedVersion,
	// naming the versions the provider can run, unless it can run version v
	// (spec.kubernetesVersion).
	CheckKubernetesVersion(v string) error
}

// FactSource is implemented by a provider whose control plane runs with the
// flags the built-in control-plane plugin renders from the provider's machine
// facts (addresses, ports, certificate paths): what render shows is then what
// the provider runs. Up sets the facts as that plugin's "machine" value before
// anything resolves, and refuses a cluster that does not enable it.
type FactSource interface {
	// Facts returns the control-plane machine's facts, as the plugin's values
	// schema describes them. It starts nothing.
	Facts() (map[string]any, error)
}

// FileDeployer is implemented by a provider that deploys the rendered files
// themselves (the cloud template, the node configurations it references): up
// renders every file and passes them in Desired.Files.
type FileDeployer interface {
	// DeploysFiles reports whether Desired.Files is wanted: always for the aws
	// provider, for the local provider when it boots machines from them.
	DeploysFiles() bool
}

// Previewer is implemented by a provider that can say what Up would change in a
// cloud without changing it (the aws provider, through change sets it deletes):
// `kubeplug plan --cloud` prints it.
type Previewer interface {
	// Preview returns, per cloud stack in deployment order, what Up with d would
	// change. d.Files holds the rendered files.
	Preview(ctx context.Context, d *Desired) ([]StackPreview, error)
}

// StackPreview is what Up would do to one cloud stack.
type StackPreview struct {
	// Stack is the stack's name in the cloud.
	Stack string `json:"stack"`
	// Exists is whether the stack exists now.
	Exists bool `json:"exists"`
	// Changes are one line each, as a diff: "+ Add AWS::EC2::VPC VPC",
	// "~ Modify AWS::SQS::Queue Work"; none when nothing changes.
	Changes []string `json:"changes"`
	// Note says why the changes are incomplete, empty when they are not.
	Note string `json:"note,omitempty"`
}

// CloudDrifter is implemented by a provider whose cloud resources can drift from
// what it deployed (the aws provider, through CloudFormation's drift
// detection): `kubeplug diff --live` reports it.
type CloudDrifter interface {
	// CloudDrift detects, per deployed stack, what changed outside the provider.
	CloudDrift(ctx context.Context) ([]StackDrift, error)
}

// StackDrift is what changed in one cloud stack outside the provider.
type StackDrift struct {
	Stack string `json:"stack"`
	// Status is IN_SYNC, DRIFTED or NOT_CHECKED.
	Status string `json:"status"`
	// Resources are the drifted resources, one line each:
	// "Work (AWS::SQS::Queue) MODIFIED: Properties.X: expected 1, actual 2".
	Resources []string `json:"resources,omitempty"`
}

// ImageLoader is a provider whose clusters pull their images through a registry
// it runs (the local provider's real nodes): LoadImage pushes the images of an
// archive — a docker-archive tarball or an OCI image layout directory — there,
// under their own repository and tag, and returns their names.
type ImageLoader interface {
	LoadImage(ctx context.Context, path string) ([]string, error)
}
