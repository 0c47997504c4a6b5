// Package runtime gives each planned plugin the runtimes that run its stages, and
// ends the processes they start. Every runtime implements stage.Runtime (package
// stage is the contract); none knows the engine:
//
//   - declarative (package declarative): the plugin's contributes block and
//     manifests, rendered as templates; every plugin has it;
//   - exec (package exec): spec.runtime.type exec, one process per stage call,
//     JSON on stdin and stdout;
//   - grpc (package grpc): spec.runtime.type grpc, one go-plugin process for the
//     whole run;
//   - in-process Go: a library user's value, registered by plugin name in
//     Options.InProcess.
//
// Resolver is the standard engine.RuntimeResolver: a host builds one per run,
// passes it as engine.Options.Runtimes, and closes it when the run ends. The wire
// protocol is in package protocol and docs/plugin-protocol.md.
package runtime
