// Package engine runs plugins through kubeplug's stages — initialise, render,
// deploy, validate — and builds the model they contribute to.
//
// A stage completes across every plugin before the next starts. Within a stage,
// plugins run wave by wave in the resolver's order; the members of one wave run
// concurrently and see the model as it stood when the wave began, and their
// contributions are merged in name order, so the result never depends on timing.
// (The one exception is the deploy stage under apply, whose caller runs each plugin
// with RunPlugin once the plugins it waits for are deployed; the content is rendered
// before, so only diagnostics can tell.)
// Every plugin receives the whole cluster, every plugin's effective values (others'
// sensitive values redacted) and the model so far. A plugin answers with a
// contribution and diagnostics: a fatal diagnostic stops the run once the stage has
// finished across all plugins, so a user sees every problem of a stage at once; a
// warning is reported and the run goes on.
//
// How a plugin's stages run is a stage.Runtime, and which runtimes a plugin gets
// is the RuntimeResolver given in Options at construction (runtime.Resolver is the
// standard one). The runtimes live under pkg/runtime and do not know the engine:
// the declarative runtime renders the plugin's contributes block and manifests as
// Go templates; exec and gRPC runtimes run the plugin's own executables; a library
// user registers Go values in-process. An engine without a resolver runs
// declarative plugins only.
package engine
