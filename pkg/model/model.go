package model

import (
	"path"
	"strings"
)

// ControlPlanePool is the name of the pseudo node pool that stands for the
// control-plane machines; node contributions for role control-plane land there.
const ControlPlanePool = "control-plane"

// Roles of machines.
const (
	RoleControlPlane = "control-plane"
	RoleWorker       = "worker"
)

// Control-plane components.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
)

// Components lists the control-plane components in a fixed order.
var Components = []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler}

// Setting is a value and the plugin that set it.
type Setting[T any] struct {
	Value T      `json:"value"`
	By    string `json:"by"`
}

// Model is everything the plugins contributed, ready to render.
type Model struct {
	ControlPlane ControlPlane `json:"controlPlane"`
	// Pools are the node pools by name, with ControlPlanePool for the control plane.
	Pools      map[string]*Pool `json:"pools"`
	Cloud      Cloud            `json:"cloud"`
	Kubernetes Kubernetes       `json:"kubernetes"`
	// KeyPairs are the plugins' key pairs (declarations only: the provider
	// issues and delivers them), in plugin order.
	KeyPairs []KeyPair `json:"keyPairs,omitempty"`
	// Deployed is what the provider deployed to the cloud (the aws provider's
	// stacks and uploaded files), set once the provider brought the cluster up:
	// the validate stage's plugin code sees it. Nil before and for providers that
	// deploy nothing to a cloud. Plugins do not contribute it.
	Deployed *Deployed `json:"deployed,omitempty"`

	// objects indexes Kubernetes.Objects by ObjectKey, so adding many objects stays
	// linear.
	objects map[string]int
	// groups indexes the API groups the objects serve (CRDs, APIServices).
	groups map[string]servedBy
}

// ControlPlane holds the control-plane components' configuration.
type ControlPlane struct {
	// Components by name (KubeAPIServer, ...).
	Components map[string]*Component `json:"components"`
	// FeatureGates apply to every control-plane component.
	FeatureGates map[string]Setting[bool] `json:"featureGates,omitempty"`
}

// Component is one control-plane component.
type Component struct {
	// Flags without leading dashes.
	Flags map[string]Setting[string] `json:"flags,omitempty"`
	// Volumes by name.
	Volumes map[string]Volume `json:"volumes,omitempty"`
}

// Volume is a host path mounted into a component.
type Volume struct {
	HostPath  string `json:"hostPath"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
	By        string `json:"by,omitempty"`
}

// Pool is one node pool's machines.
type Pool struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	Count int    `json:"count"`
	// MinSize and MaxSize bound an autoscaled pool (cluster.yaml's); nil is Count.
	MinSize *int `json:"minSize,omitempty"`
	MaxSize *int `json:"maxSize,omitempty"`
	// Files by absolute path.
	Files map[string]File `json:"files,omitempty"`
	// Units by unit name.
	Units   map[string]*Unit `json:"units,omitempty"`
	Kubelet Kubelet          `json:"kubelet"`
	// Hooks in plugin order, then declaration order.
	Hooks []Hook `json:"hooks,omitempty"`
}

// File is written on a machine.
type File struct {
	Content string `json:"content"`
	// URL and SHA256, when set, say the content is downloaded: the bytes of
	// URL whose hex SHA-256 is SHA256, which the caller of render fetches
	// (render.Input.URLFile); Content is then empty.
	URL    string `json:"url,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Mode is octal, for example "0644".
	Mode  string `json:"mode"`
	Owner string `json:"owner,omitempty"`
	By    string `json:"by,omitempty"`
}

// Unit is a systemd unit and its drop-ins. A unit with empty Content only carries
// drop-ins for a unit the machine already has.
type Unit struct {
	Content string `json:"content,omitempty"`
	Enable  bool   `json:"enable,omitempty"`
	// Mask stops and masks a unit the machine already has; such a unit has no
	// Content, Enable or DropIns.
	Mask bool `json:"mask,omitempty"`
	// DropIns by file name.
	DropIns map[string]Setting[string] `json:"dropIns,omitempty"`
	By      string                     `json:"by,omitempty"`
}

// Kubelet settings of a pool.
type Kubelet struct {
	Flags        map[string]Setting[string] `json:"flags,omitempty"`
	Labels       map[string]Setting[string] `json:"labels,omitempty"`
	FeatureGates map[string]Setting[bool]   `json:"featureGates,omitempty"`
	Taints       []Taint                    `json:"taints,omitempty"`
}

// Taint on a pool's Nodes.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
	By     string `json:"by,omitempty"`
}

// Hook is run by the node agent at an entry point of a machine's boot.
type Hook struct {
	// Name is unique within its plugin.
	Name string `json:"name"`
	// At is beforeNodeup, afterNodeup or afterDeploy.
	At string `json:"at"`
	// Command is the argv to run; for a script hook it runs Script's installed path.
	Command []string `json:"command,omitempty"`
	// Script is the script's content, installed on the machine by the renderer.
	Script   string `json:"script,omitempty"`
	Behavior string `json:"behavior"`
	// Timeout is a Go duration.
	Timeout string `json:"timeout"`
	// When is a CEL condition, empty for always.
	When string `json:"when,omitempty"`
	// URL is a script the node agent downloads (https:// or s3://), pinned by SHA256.
	URL    string `json:"url,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Before and Requires name hooks of the same phase, "plugin/hook" or a bare name
	// within the plugin; Once runs a hook that succeeded on a machine never again.
	Before   []string `json:"before,omitempty"`
	Requires []string `json:"requires,omitempty"`
	Once     bool     `json:"once,omitempty"`
	By       string   `json:"by,omitempty"`
}

// Cloud is the cloud template's contributions.
type Cloud struct {
	// Resources by logical name.
	Resources map[string]Setting[any] `json:"resources,omitempty"`
	// Outputs by name.
	Outputs map[string]Setting[any] `json:"outputs,omitempty"`
	// IAM statements by role (control-plane or worker), in plugin order.
	IAM map[string][]Statement `json:"iam,omitempty"`
	// Patches to the generated template, applied in plugin order.
	Patches []Patch `json:"patches,omitempty"`
	// Stacks are the plugins' own CloudFormation stacks, by stack name.
	Stacks map[string]Setting[Stack] `json:"stacks,omitempty"`
	// Pools are the plugins' per-pool parts, in plugin order.
	Pools []PoolPart `json:"pools,omitempty"`
}

// PoolPart is one plugin's part of the cloud resources of the pools it selects
// (v1alpha1.CloudPool).
type PoolPart struct {
	// Pool is a path.Match pattern of pool names, Role a role; empty selects any.
	Pool string `json:"pool,omitempty"`
	Role string `json:"role,omitempty"`
	// IAM, Tags, SecurityGroupIngress and LaunchTemplate are named entries of the
	// pool's cloud document.
	IAM                  map[string]any    `json:"iam,omitempty"`
	Tags                 map[string]string `json:"tags,omitempty"`
	SecurityGroupIngress map[string]any    `json:"securityGroupIngress,omitempty"`
	LaunchTemplate       map[string]any    `json:"launchTemplate,omitempty"`
	// Patches apply to the pool's cloud document.
	Patches []PatchOp `json:"patches,omitempty"`
	By      string    `json:"by,omitempty"`
}

// Selects reports whether the part applies to a pool.
func (p PoolPart) Selects(pool *Pool) bool {
	if p.Role != "" && p.Role != pool.Role {
		return false
	}
	if p.Pool == "" {
		return true
	}
	ok, err := path.Match(p.Pool, pool.Name)
	return err == nil && ok
}

// Deployed is what a provider deployed to a cloud.
type Deployed struct {
	// Stacks by name: "core" (cloud/template.json) and the plugins' stacks.
	Stacks map[string]DeployedStack `json:"stacks"`
	// Assets map each rendered file's path to where it was uploaded (s3://...).
	Assets map[string]string `json:"assets,omitempty"`
}

// DeployedStack is one deployed CloudFormation stack.
type DeployedStack struct {
	// StackName and StackID are CloudFormation's.
	StackName string `json:"stackName"`
	StackID   string `json:"stackID"`
	// Status is the stack's status, such as CREATE_COMPLETE.
	Status string `json:"status"`
	// Outputs of the stack by key, such as APIServerEndpoint.
	Outputs map[string]string `json:"outputs,omitempty"`
}

// Stack is one extra CloudFormation stack (v1alpha1.CloudStack).
type Stack struct {
	Template   map[string]any    `json:"template"`
	Parameters map[string]string `json:"parameters,omitempty"`
	// Inputs map parameters to other stacks' outputs, as STACK.OUTPUT.
	Inputs    map[string]string `json:"inputs,omitempty"`
	DependsOn []string          `json:"dependsOn,omitempty"`
}

// Statement is one IAM policy statement.
type Statement struct {
	Statement map[string]any `json:"statement"`
	By        string         `json:"by,omitempty"`
}

// Patch is an RFC 6902 JSON patch from one plugin.
type Patch struct {
	Ops []PatchOp `json:"ops"`
	By  string    `json:"by,omitempty"`
}

// PatchOp is one RFC 6902 operation.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	From  string `json:"from,omitempty"`
	Value any    `json:"value,omitempty"`
}

// Kubernetes is the content deployed into the running cluster.
type Kubernetes struct {
	// Objects in plugin order, then file and document order.
	Objects []Object `json:"objects,omitempty"`
	// HelmReleases in plugin order.
	HelmReleases []HelmRelease `json:"helmReleases,omitempty"`
	// Patches to objects, applied in plugin order after every plugin contributed.
	Patches []ObjectPatch `json:"patches,omitempty"`
}

// Object is one Kubernetes object as plain values.
type Object struct {
	Object map[string]any `json:"object"`
	By     string         `json:"by,omitempty"`
	// File and Line say where the object is written, for diagnostics about
	// it: a manifest of the plugin's package, as rendered. Empty for objects of
	// plugin code; not part of the model's JSON.
	File string `json:"-"`
	Line int    `json:"-"`
}

// HelmRelease is a chart from a plugin's package, installed as a release.
type HelmRelease struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Chart is the chart directory or archive inside the plugin's package, or a
	// chart by reference: oci://REGISTRY/REPO/CHART, or the chart's name in Repo.
	Chart string `json:"chart"`
	// Repo is the Helm repository of a chart by reference; Version the version
	// (or constraint) of a chart by reference.
	Repo    string `json:"repo,omitempty"`
	Version string `json:"version,omitempty"`
	// Test runs the chart's test hooks in the validate stage.
	Test   bool           `json:"test,omitempty"`
	Values map[string]any `json:"values,omitempty"`
	By     string         `json:"by,omitempty"`
}

// IsRef reports whether the release's chart is named by reference (an OCI
// reference or a chart of a Helm repository) rather than a path in the package.
func (h HelmRelease) IsRef() bool { return IsChartRef(h.Chart, h.Repo) }

// IsChartRef reports whether chart (with repo) names a chart by reference.
func IsChartRef(chart, repo string) bool {
	return repo != "" || strings.HasPrefix(chart, "oci://")
}

// ChartRef is how a chart by reference is shown and keyed: oci://…/CHART@VERSION
// or REPO/CHART@VERSION, VERSION as written (a constraint).
func (h HelmRelease) ChartRef() string {
	s := h.Chart
	if h.Repo != "" {
		s = strings.TrimSuffix(h.Repo, "/") + "/" + h.Chart
	}
	return s + "@" + h.Version
}

// ObjectPatch patches the objects matching Target.
type ObjectPatch struct {
	Target ObjectRef `json:"target"`
	Ops    []PatchOp `json:"ops"`
	By     string    `json:"by,omitempty"`
}

// ObjectRef selects objects; empty fields match anything.
type ObjectRef struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
}

// Contribution is what one plugin adds at one stage. It uses the model's own types;
// By fields are ignored and stamped by Add. Pools is keyed by pool name and holds only
// the pools the contribution applies to.
type Contribution struct {
	ControlPlane *ControlPlane    `json:"controlPlane,omitempty"`
	Pools        map[string]*Pool `json:"pools,omitempty"`
	Cloud        *Cloud           `json:"cloud,omitempty"`
	Kubernetes   *Kubernetes      `json:"kubernetes,omitempty"`
	// KeyPairs come only from plugin.yaml (the declarative runtime): plugin
	// code cannot contribute them, and a response that tries is refused as
	// any unknown field is.
	KeyPairs []KeyPair `json:"-"`
}

// KeyPairDir is where a plugin's key pairs are on a machine.
func KeyPairDir(plugin string) string { return path.Join("/etc/kubeplug/plugins", plugin, "pki") }

// KeyPair is a plugin's key pair as declared (contributes.keyPairs, rendered):
// what to issue and which pools' machines get it. It holds no key.
type KeyPair struct {
	Name string `json:"name"`
	// CA is "cluster" or "plugin" (a CA of the plugin's own).
	CA            string   `json:"ca"`
	CommonName    string   `json:"commonName"`
	Organizations []string `json:"organizations,omitempty"`
	DNSNames      []string `json:"dnsNames,omitempty"`
	IPAddresses   []string `json:"ipAddresses,omitempty"`
	Usages        []string `json:"usages"`
	// Validity is a Go duration; empty is a year.
	Validity string `json:"validity,omitempty"`
	// Pools are the pools whose machines get the pair, sorted.
	Pools []string `json:"pools"`
	By    string   `json:"by,omitempty"`
}

// CertFile is the pair's certificate on a machine; KeyFile its key (0600),
// CAFile the CAs that sign it (the current one, then earlier ones not yet
// expired).
func (k KeyPair) CertFile() string { return path.Join(KeyPairDir(k.By), k.Name+".crt") }

// KeyFile is the pair's key on a machine.
func (k KeyPair) KeyFile() string { return path.Join(KeyPairDir(k.By), k.Name+".key") }

// CAFile is the bundle of the pair's CA on a machine.
func (k KeyPair) CAFile() string { return path.Join(KeyPairDir(k.By), k.Name+"-ca.crt") }
