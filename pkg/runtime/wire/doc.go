// Package wire is the gRPC contract between kubeplug and an out-of-process plugin:
// the go-plugin handshake, the service with one RPC per stage, and the client the
// host uses. The host runtime (pkg/runtime/grpc) and the SDK both build on it, and
// it is small so that plugins do not link the host.
package wire
