// Package sdk is the Go SDK for kubeplug plugins that run out of process, as
// `spec.runtime.type: grpc` (or exec).
//
// A plugin is a Go value that implements the stages it cares about, each an
// optional interface — Initialiser, Renderer, Deployer, Validator — and a main
// function that serves it:
//
//	type P struct{}
//
//	func (P) Initialise(ctx context.Context, req *sdk.Request) (*sdk.Response, error) {
//		return &sdk.Response{Contribution: ...}, nil
//	}
//
//	func main() { sdk.Serve(P{}) }
//
// Stages the value does not implement are answered as unsupported, which the host
// treats as an empty answer. Problems the plugin finds in its input are
// diagnostics in the response; an error means the plugin could not answer at all,
// and the host reports it as fatal. Log to stderr (or with log/slog's default
// handler): the host captures it line by line. Package sdktest runs a built
// plugin through the host's own runtime in tests.
package sdk
