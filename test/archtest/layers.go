package archtest

// Module is the module path every prefix below is relative to.
const Module = "github.com/kubeplug/kubeplug"

// Layer is one layer of the architecture: the packages under Prefixes.
type Layer struct {
	Name string
	// Prefixes are import paths relative to Module; each names the package at that
	// path and every package below it.
	Prefixes []string
	// Why says what the layer is for, so that a new package finds its place.
	Why string
}

// Layers from the bottom up. A package imports only its own layer and the layers
// below it.
var Layers = []Layer{
	{
		Name:     "base",
		Prefixes: []string{"api", "pkg/diag", "pkg/values", "plugins", "internal"},
		Why:      "the API types, diagnostics, values, the built-in plugins as files, and utilities that know nothing of plugins",
	},
	{
		// A layer of its own, though under api/: these are Kubernetes objects
		// (apimachinery's ObjectMeta, Condition, runtime.Object), which the
		// file formats of base must never link (pkg/plugin's budget,
		// PluginHeavy). Above base, so that nothing there can import it; below
		// everything else, so that the views (the dashboard's fleet page) read
		// the same types as the controller that writes them.
		Name:     "controller API",
		Prefixes: []string{"api/controller"},
		Why:      "the Kubernetes API types of kubeplug's controller (its CRDs' kinds): API types like base's, but they link apimachinery",
	},
	{
		Name:     "contracts",
		Prefixes: []string{"pkg/model", "pkg/stage", "pkg/expr", "pkg/hookspec"},
		Why:      "what plugins contribute and how they are called: the model, the stage contract, CEL expressions, the node-hook manifest format",
	},
	{
		Name:     "packages",
		Prefixes: []string{"pkg/plugin", "pkg/archive", "pkg/resolve", "pkg/sign"},
		Why:      "reading and checking one plugin package, and its archive; resolving versions into waves",
	},
	{
		Name:     "inputs",
		Prefixes: []string{"pkg/source", "pkg/config", "pkg/lock", "pkg/oci", "pkg/expansion"},
		Why:      "where packages come from (directories, catalogs, OCI registries) and the cluster file that picks them",
	},
	{
		Name:     "stages",
		Prefixes: []string{"pkg/runtime", "pkg/engine", "pkg/render", "pkg/serving", "sdk", "pkg/internal"},
		Why:      "running plugins' stages (runtimes, the engine, the plugin SDK) and rendering the result to files; nothing here talks to a cluster",
	},
	{
		Name:     "cluster",
		Prefixes: []string{"pkg/deploy", "pkg/check", "pkg/nodeagent", "pkg/provider", "pkg/lease", "pkg/s3lite", "sdk/apiserver", "sdk/siteoperator"},
		Why:      "everything that talks to a cluster, a machine or a cloud: deploy, checks, the node agent, providers, their S3 calls (s3lite) and the local control plane",
	},
	{
		Name:     "actions",
		Prefixes: []string{"pkg/action"},
		Why:      "one action per verb, composing the layers below into the lifecycle",
	},
	{
		Name:     "views",
		Prefixes: []string{"pkg/dashboard"},
		Why:      "the actions' results as web pages (the dashboard), for the CLI to serve and, below the controller, for it too",
	},
	{
		Name:     "controllers",
		Prefixes: []string{"pkg/controller"},
		Why:      "kubeplug's controller: the actions behind Kubernetes resources, reconciled",
	},
	{
		Name:     "commands",
		Prefixes: []string{"pkg/cmd", "cmd"},
		Why:      "the CLI: flags bound to actions",
	},
	{
		Name:     "tests",
		Prefixes: []string{"test", "examples"},
		Why:      "test harnesses, end-to-end suites and examples: they may use everything, and nothing uses them",
	},
}

// Exception is one import that goes upward today, with the issue part that
// removes it.
type Exception struct {
	From, To string // import paths relative to Module
	Why      string
}

// Exceptions are the known upward imports. Each is to be removed, not added to.
var Exceptions = []Exception{}

// LoadingPackages read plugins, sources and cluster files: `kubeplug plugin lint`,
// `render` and `plan` and every library user that only reads. They must link
// nothing of NoCluster.
var LoadingPackages = []string{
	"pkg/plugin", "pkg/archive", "pkg/source", "pkg/config", "pkg/resolve", "pkg/model",
	"pkg/values", "pkg/diag", "pkg/stage", "pkg/expr", "pkg/hookspec",
}

// NoCluster are the import-path prefixes of code that talks to a cluster or a
// cloud: Kubernetes' client, Helm (its SDK installs releases and links the
// client), the AWS SDK.
var NoCluster = []string{"k8s.io/client-go", "helm.sh/", "github.com/aws/"}

// PluginHeavy is what pkg/plugin, read by every command and by plugin authors'
// tools, links beyond NoCluster today and must not: any Kubernetes library, the
// runtimes' gRPC and go-plugin, readiness computation.
var PluginHeavy = []string{"k8s.io/", "sigs.k8s.io/", "google.golang.org/grpc", "github.com/hashicorp/", "github.com/fluxcd/"}

// ControllerAPINoDeps is what the controller's API package (api/controller/...)
// must not link: it is types for apimachinery, which users of the API import
// without the controller, its client or the engine.
var ControllerAPINoDeps = []string{
	"k8s.io/client-go", "k8s.io/api/", "sigs.k8s.io/controller-runtime", "helm.sh/", "github.com/aws/",
	Module + "/pkg/", Module + "/internal/", Module + "/api/v1alpha1",
}

// ClusterLayer is the lowest layer allowed to talk to a cluster: no package of a
// layer below it links NoCluster, but for those in LinksClientThroughHelm.
const ClusterLayer = "cluster"

// LinksClientThroughHelm are the packages below ClusterLayer that link client-go
// and Helm all the same, because they render Helm charts (see Render below).
var LinksClientThroughHelm = []string{"pkg/render"}

// ActionNoDeps is what pkg/action, and so the controller's and every library
// user's build, links only when the binary registers a provider at its edge
// (pkg/provider/all): the AWS SDK and the local provider's runners.
var ActionNoDeps = []string{"github.com/aws/", Module + "/pkg/provider/"}

// ControllerBinaryNoDeps is what the controller's own binary
// (cmd/kubeplug-controller, its image's program) never links: a cloud SDK,
// the aws provider and the local provider with its runners (its control
// plane, its real nodes). It links the hosts provider, whose clusters it makes
// (ManagedCluster), and with it the helpers hosts shares with the other
// providers (pkg/provider/internal/..., pkg/provider/nodeimage).
var ControllerBinaryNoDeps = []string{"github.com/aws/", Module + "/pkg/provider/aws", Module + "/pkg/provider/local"}

// CLIBinaryNoDeps is what the CLI's binary (cmd/kubeplug) does not link
// although its features talk to what these serve (issue 42: the binary under
// 100 MB): the AWS SDK's S3 client, about 6 MB for the eight calls pkg/s3lite
// makes with the SDK's signer and credentials.
var CLIBinaryNoDeps = []string{"github.com/aws/aws-sdk-go-v2/service/s3"}

// ControllerBinaryLinks are the providers the controller's binary registers
// at its edge by blank import (pkg/controller reaches providers only through
// the registry, ControllerNoDeps): those of controller.DefaultClusterProviders.
var ControllerBinaryLinks = []string{Module + "/pkg/provider/hosts"}

// ControllerNoDeps is what pkg/controller links no more than pkg/action
// (ActionNoDeps): no provider; the binary that runs it registers the ones it
// serves.
var ControllerNoDeps = ActionNoDeps

// ProviderRegistry is the package that registers every provider
// (cmd/kubeplug's edge). The packages it imports are the providers; each
// provider is its folder, and no provider imports another's packages: what
// two share lives in pkg/provider/internal/... or beside the providers
// (pkg/provider/nodeimage, pkg/provider/bootstraptoken).
const ProviderRegistry = "pkg/provider/all"

// Render is what holds for pkg/render. It renders Helm charts with Helm's SDK, and
// every Helm package that renders a chart (chart/common/util, engine) links
// client-go, for the capabilities and lookup functions charts may call, so render
// cannot leave client-go out of its build. It never builds a client itself: it
// imports no RenderNoImport package (Helm installs with a client-only dry run) and
// links none of RenderNoDeps.
var (
	RenderNoImport = []string{"k8s.io/client-go"}
	RenderNoDeps   = []string{"github.com/aws/"}
)
