// Package runtime runs the code that plugin packages carry: it picks the runtime
// a package's spec.runtime asks for — exec (package exec: one process per stage
// call, JSON on stdin and stdout) or grpc (package grpc: one go-plugin process for
// the whole run) — and keeps track of what it started so that one Close ends it.
//
// Hosts hand a Set's Runtime method to the engine as engine.Options.CodeRuntime
// and close the Set when the run ends. In-process Go plugins need none of this:
// they are registered with engine.Options.Runtimes. The wire protocol is in
// package protocol and docs/plugin-protocol.md.
package runtime
