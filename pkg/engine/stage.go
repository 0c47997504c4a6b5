package engine

import "github.com/kubeplug/kubeplug/pkg/stage"

// The stage contract lives in pkg/stage, small enough for plugins to link; the
// engine re-exports it.
type (
	// Stage is one step of the lifecycle.
	Stage = stage.Stage
	// PluginValues are one plugin's values as other plugins see them.
	PluginValues = stage.PluginValues
	// Request is what a plugin receives at a stage.
	Request = stage.Request
	// Response is a plugin's answer at a stage.
	Response = stage.Response
	// Runtime runs a plugin's stages.
	Runtime = stage.Runtime
	// RuntimeFunc adapts a function to a Runtime.
	RuntimeFunc = stage.RuntimeFunc
)

// Stages, in the order they run.
const (
	Initialise = stage.Initialise
	Render     = stage.Render
	Deploy     = stage.Deploy
	Validate   = stage.Validate
)

// Stages lists every stage in order.
var Stages = stage.Stages
