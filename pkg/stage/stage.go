package stage

import (
	"context"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/model"
)

// Stage is one step of the lifecycle.
type Stage string

// Stages, in the order they run.
const (
	Initialise Stage = "initialise"
	Render     Stage = "render"
	Deploy     Stage = "deploy"
	Validate   Stage = "validate"
)

// Stages lists every stage in order.
var Stages = []Stage{Initialise, Render, Deploy, Validate}

// PluginValues are one plugin's values as other plugins see them.
type PluginValues struct {
	Version string         `json:"version"`
	Values  map[string]any `json:"values"`
}

// Request is what a plugin receives at a stage.
type Request struct {
	Stage   Stage             `json:"stage"`
	Cluster *v1alpha1.Cluster `json:"cluster"`
	Plugin  string            `json:"plugin"`
	Version string            `json:"version"`
	// Values are this plugin's cluster-level values, sensitive ones included.
	Values map[string]any `json:"values"`
	// PoolValues are this plugin's values per node pool it applies to.
	PoolValues map[string]map[string]any `json:"poolValues"`
	// Plugins are every resolved plugin's values, with sensitive values of other
	// plugins redacted.
	Plugins map[string]PluginValues `json:"plugins"`
	// Model is the model so far. Runtimes must not modify it.
	Model *model.Model `json:"model"`
	// Facts are the cluster's facts (see Facts); templates read them as .Facts.
	Facts *Facts `json:"facts,omitempty"`
	// Kubeconfig, at the deploy and validate stages of a run against a cluster,
	// is a kubeconfig (YAML) for it as the plugin's own ServiceAccount, which
	// may do what the plugin's spec.runtime.rbac says and no more; empty
	// otherwise (initialise, render, a dry run, a provider whose API server
	// kubeplug does not reach).
	Kubeconfig string `json:"kubeconfig,omitempty"`
}

// Response is a plugin's answer at a stage.
type Response struct {
	// Contribution is merged into the model (at initialise; later stages may add too).
	Contribution *model.Contribution `json:"contribution,omitempty"`
	// Diagnostics are the plugin's findings; fatal ones stop the run after the stage.
	Diagnostics diag.List `json:"diagnostics,omitempty"`
	// Values, at initialise, are values the plugin's code initialised (a
	// generated name, a discovered default): merged over the plugin's
	// cluster-level values (maps key by key, anything else replaced), checked
	// against its schema again, and what every later stage and every other
	// plugin (.Plugins) sees. Ignored at the other stages.
	Values map[string]any `json:"values,omitempty"`
}

// Runtime runs a plugin's stages.
type Runtime interface {
	// Run runs one stage for one plugin. It returns an error only when the plugin
	// could not give an answer (it crashed, hung or spoke garbage); problems the
	// plugin found are diagnostics in the response. Cancelling ctx abandons the call
	// and must release everything the runtime started.
	Run(ctx context.Context, req *Request) (*Response, error)
}

// RuntimeFunc adapts a function to a Runtime.
type RuntimeFunc func(ctx context.Context, req *Request) (*Response, error)

// Run calls f.
func (f RuntimeFunc) Run(ctx context.Context, req *Request) (*Response, error) { return f(ctx, req) }

var _ Runtime = RuntimeFunc(nil)
