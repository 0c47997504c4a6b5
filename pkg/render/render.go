package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/model"
)

// Paths on the machines that the rendered node configuration relies on. The node agent
// and the machine images agree on them, so they are part of the package's contract.
const (
	// AgentPath is where machine images install the kubeplug node agent.
	AgentPath = "/usr/local/bin/kubeplug"
	// KubeletPath is where machine images install the kubelet.
	KubeletPath = "/usr/bin/kubelet"
	// HooksDir holds hook scripts as HooksDir/<plugin>/<hook>; the node agent
	// defines it, since it reads what is there.
	HooksDir = hookspec.HooksDir
	// HooksManifestPath lists every hook of the machine for the node agent.
	HooksManifestPath = hookspec.HooksManifestPath
	// KubeletEnvPath is the systemd environment file carrying the kubelet's flags.
	KubeletEnvPath = "/etc/kubeplug/kubelet.env"
	// The provider's part of a machine's boot (docs/machines.md), in kubeadm's
	// layout: the kubelet's bootstrap kubeconfig (a bootstrap token and the
	// cluster's CA), the kubeconfig its TLS bootstrap writes, its configuration,
	// and KUBELET_PROVIDER_ARGS (the node's address) in KubeletProviderEnvPath.
	// The rendered files name these paths; the provider fills them.
	KubeletBootstrapKubeconfigPath = "/etc/kubernetes/bootstrap-kubelet.conf"
	KubeletKubeconfigPath          = "/etc/kubernetes/kubelet.conf"
	KubeletConfigPath              = "/var/lib/kubelet/config.yaml"
	KubeletProviderEnvPath         = "/etc/kubeplug/kubelet-provider.env"
	// StaticPodDir is where control-plane machines get the static Pod manifests.
	StaticPodDir = "/etc/kubernetes/manifests"
	// BootSecretsFile is the name of a pool's boot secrets object
	// (Input.BootSecrets), and BootSecretsDropIn the drop-in of
	// kubeplug-boot.service that fetches it.
	BootSecretsFile   = "boot-secrets.json"
	BootSecretsDropIn = "10-boot-secrets.conf"
)

// BootSecretsWait is how long a machine's boot waits for its boot secrets
// object to appear (Input.BootSecrets).
const BootSecretsWait = 20 * time.Minute

// Input is everything a render needs. Model is read, never modified.
type Input struct {
	// ClusterName names the cluster in the cloud template.
	ClusterName string
	// KubernetesVersion like "1.37.2" (a leading "v" is accepted) picks the control-plane
	// images and the Kubernetes version Helm charts are rendered for.
	KubernetesVersion string
	// EtcdVersion is the etcd release that goes with KubernetesVersion, for the
	// etcd static Pod's image (registry.k8s.io/etcd:<EtcdVersion>-0, as kubeadm
	// tags it); empty tags it with KubernetesVersion like the other components.
	EtcdVersion string
	// Model is the finished model of the cluster.
	Model *model.Model
	// Order is the resolved plugin order. It fixes the NN prefix of kubernetes/NN-<plugin>.yaml;
	// when empty the order is the order in which plugins first appear in the model, which
	// is the same as long as every plugin contributes Kubernetes content.
	Order []string
	// Charts gives access to a plugin's package files; a Helm release's Chart is a
	// directory inside it. It may be nil when the model has no Helm releases.
	Charts func(plugin string) fs.FS
	// RemoteChart returns the archive of a release's chart by reference
	// (h.IsRef()), fetched, verified and pinned by the caller; nil when the
	// model has none.
	RemoteChart func(h model.HelmRelease) ([]byte, error)
	// ChartDependency returns the archive of a dependency that the chart of h
	// (or one of its subcharts) declares with an https:// or oci:// repository
	// and its charts/ lacks, fetched by the caller; nil refuses such a chart.
	ChartDependency func(h model.HelmRelease, dep *chartv2.Dependency) ([]byte, error)
	// URLFile returns the bytes of a node file that is downloaded
	// (model.File.URL), fetched by the caller and checked against its sha256;
	// nil refuses such a file.
	URLFile func(url, sha256 string) ([]byte, error)
	// Plan is written as plan.json as-is; nil writes no plan.json.
	Plan any
	// Cloud builds the cloud template (cloud/template.json); nil renders none
	// and refuses plugins' cloud contributions. pkg/provider.CloudTemplate is
	// the registered one.
	Cloud CloudTemplate
	// Provider is the cluster's spec.provider, for Cloud; nil when it names none.
	Provider *v1alpha1.Provider
	// BootSecrets returns the URL (s3://...) the machines of a pool fetch the
	// provider's part of their boot from with their own identity, as the
	// first step of kubeplug-boot.service (BootSecretsDropIn); "" or a nil
	// func renders no such step (the local provider gives it as vendor data).
	// pkg/provider.SpecRenderOf gives the provider's.
	BootSecrets func(pool string) string
	// CloudValues are the values of the built-in cloud plugin (plugins/cloud),
	// for Cloud, when the cluster enables it; nil takes that plugin's defaults.
	CloudValues map[string]any
	// ServedAPI says whether KubernetesVersion serves kind at apiVersion: ""
	// when it does; else what is wrong and what to use instead, fatal when the
	// version does not serve it at all, a warning when it is deprecated. Render
	// reports every object of such an API. Nil checks nothing. (The action
	// layer gives it internal/k8sversions' table; render knows no versions.)
	ServedAPI func(apiVersion, kind string) (msg string, fatal bool)
	// Flag says what is wrong with the flag --name=value of component (a
	// control-plane component of model.Components, or "kubelet") in
	// KubernetesVersion: "" when nothing is; fatal when the component would
	// refuse it (an unknown flag, an ill-typed value), else a warning. Render
	// reports every flag a plugin set that it objects to. Nil checks nothing.
	// (The action layer gives it internal/k8sversions' flag tables.)
	Flag func(component, name, value string) (msg string, fatal bool)
}

// Files renders everything into memory: relative slash path -> content. It returns no
// files when a diagnostic is fatal, so a caller cannot write half a render by mistake.
// Cancelling ctx stops the render between steps with a fatal diagnostic.
func Files(ctx context.Context, in Input) (map[string][]byte, diag.List) {
	r := &renderer{in: in, out: map[string][]byte{}}
	if !r.check() {
		return nil, r.diags
	}
	steps := []func(context.Context){r.flags, r.controlPlane, r.nodes, r.cloud, r.stacks, r.kubernetes, r.plan}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			r.fatalf("", "", "render cancelled: %v", err)
			break
		}
		step(ctx)
	}
	if r.diags.HasFatal() {
		return nil, r.diags
	}
	return r.out, r.diags
}

// renderer accumulates files and diagnostics; every step reports all of its problems
// instead of stopping at the first.
type renderer struct {
	in      Input
	version string // without the leading "v"
	out     map[string][]byte
	diags   diag.List
}

func (r *renderer) fatalf(plugin, field, format string, args ...any) {
	r.diags = append(r.diags, diag.Diagnostic{Severity: diag.Fatal, Plugin: plugin, Field: field, Message: fmt.Sprintf(format, args...)})
}

// nameRE is what kubeplug accepts as a pool or plugin name: it becomes a path
// component and part of file names, so it must be one plain component.
var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`)

func (r *renderer) check() bool {
	if r.in.Model == nil {
		r.fatalf("", "", "no model to render")
		return false
	}
	if !nameRE.MatchString(r.in.ClusterName) {
		r.fatalf("", "metadata.name", "expected a cluster name of lower-case letters, digits, '.', '_' or '-', found %q", r.in.ClusterName)
	}
	v, err := semver.StrictNewVersion(strings.TrimPrefix(r.in.KubernetesVersion, "v"))
	if err != nil {
		r.fatalf("", "kubernetesVersion", "expected a version like 1.37.2, found %q", r.in.KubernetesVersion)
		return false
	}
	r.version = v.String()
	for _, name := range r.in.Model.PoolNames() {
		if !nameRE.MatchString(name) {
			r.fatalf("", "nodes."+name, "pool name %q must be lower-case letters, digits, '.', '_' or '-'", name)
		}
	}
	return !r.diags.HasFatal()
}

func (r *renderer) plan(context.Context) {
	if r.in.Plan == nil {
		return
	}
	b, err := marshalJSON(r.in.Plan)
	if err != nil {
		r.fatalf("", "plan", "encoding the plan: %v", err)
		return
	}
	r.out["plan.json"] = b
}

// marshalJSON encodes indented, with map keys sorted (encoding/json's rule), without
// HTML escaping (these files are for people and tools, not browsers) and with a
// trailing newline.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// normalizeJSON decodes and re-encodes a document, keeping numbers exactly as written,
// so that patched and unpatched documents are laid out alike.
func normalizeJSON(doc []byte) ([]byte, error) {
	v, err := decodeJSON(doc)
	if err != nil {
		return nil, err
	}
	return marshalJSON(v)
}

func decodeJSON(doc []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
