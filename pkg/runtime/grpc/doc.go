// Package grpc runs a plugin as a long-lived process speaking gRPC through
// hashicorp/go-plugin: the runtime for `spec.runtime.type: grpc`. The wire
// contract it speaks, which the Go SDK (package sdk) serves, is package wire.
//
// The process is started lazily at the first stage call and then serves every
// stage of the run, so a call costs a round trip on a local socket, not a process
// start. Start-up is guarded like the exec runtime's: the executable's digest is
// checked, the checked bytes run from a private copy (which go-plugin's
// SecureConfig checks again), in its own process group, with a minimal
// environment. go-plugin adds a handshake cookie, protocol version negotiation
// (VersionedPlugins) and mutual TLS with one-time certificates (AutoMTLS); the
// plugin also reports its SDK version, which the host checks against
// wire.SupportedSDKVersions.
//
// The service, kubeplug.runtime.v1.Plugin, has one RPC per stage and an Info RPC.
// Each carries a google.protobuf.BytesValue holding the same JSON envelope as the
// exec protocol (package protocol). That keeps one message schema for both
// runtimes, needs no code generation, and uses gRPC's standard protobuf codec
// rather than a process-wide custom one.
//
// A call that times out kills the process group; so does the end of the context
// the process was started under, and Close. The next call starts a fresh process.
package grpc
