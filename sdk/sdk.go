package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kubeplug/kubeplug/pkg/runtime/protocol"
	"github.com/kubeplug/kubeplug/pkg/runtime/wire"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// Version is the SDK's semantic version, reported to the host, which refuses
// plugins built with an SDK outside the range it supports.
const Version = "0.1.0"

// Request is what a plugin receives at a stage: the cluster, the plugin's own
// values (sensitive ones in clear), every plugin's values (others' sensitive values
// redacted) and the model so far.
type Request = stage.Request

// Response is a plugin's answer: a contribution to the model and diagnostics.
type Response = stage.Response

// Initialiser validates values and contributes to the model.
type Initialiser interface {
	Initialise(ctx context.Context, req *Request) (*Response, error)
}

// Renderer runs at the render stage, after every plugin initialised.
type Renderer interface {
	Render(ctx context.Context, req *Request) (*Response, error)
}

// Deployer runs at the deploy stage.
type Deployer interface {
	Deploy(ctx context.Context, req *Request) (*Response, error)
}

// Validator checks that the plugin works once deployed.
type Validator interface {
	Validate(ctx context.Context, req *Request) (*Response, error)
}

// ErrNoStages is returned for a value that implements none of the stage interfaces.
var ErrNoStages = errors.New("the plugin implements no stage: expected at least one of Initialise, Render, Deploy or Validate")

// stageFunc returns p's method for stage, nil when p does not implement it.
func stageFunc(p any, st stage.Stage) func(context.Context, *Request) (*Response, error) {
	switch st {
	case stage.Initialise:
		if s, ok := p.(Initialiser); ok {
			return s.Initialise
		}
	case stage.Render:
		if s, ok := p.(Renderer); ok {
			return s.Render
		}
	case stage.Deploy:
		if s, ok := p.(Deployer); ok {
			return s.Deploy
		}
	case stage.Validate:
		if s, ok := p.(Validator); ok {
			return s.Validate
		}
	}
	return nil
}

// Handler returns the gRPC service handler for p, for tests and for hosts that
// serve plugins their own way; Serve uses it.
func Handler(p any) (wire.Handler, error) {
	h := &handler{p: p}
	for _, s := range stage.Stages {
		if stageFunc(p, s) != nil {
			h.stages = append(h.stages, s)
		}
	}
	if len(h.stages) == 0 {
		return nil, fmt.Errorf("%T: %w", p, ErrNoStages)
	}
	return h, nil
}

type handler struct {
	p      any
	stages []stage.Stage
}

func (h *handler) Info(context.Context) (*wire.Info, error) {
	return &wire.Info{SDKVersion: Version, Stages: h.stages}, nil
}

func (h *handler) Stage(ctx context.Context, st stage.Stage, in []byte) ([]byte, error) {
	return answer(ctx, h.p, st, in)
}

// answer decodes a request envelope, runs p's stage and encodes the answer.
func answer(ctx context.Context, p any, st stage.Stage, in []byte) ([]byte, error) {
	f := stageFunc(p, st)
	if f == nil {
		return protocol.EncodeUnsupported(), nil
	}
	req, err := protocol.DecodeRequest(in)
	if err != nil {
		return nil, err
	}
	if req.Stage != st {
		return nil, fmt.Errorf("%w: %s request sent to the %s stage", protocol.ErrProtocol, req.Stage, st)
	}
	resp, err := f(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", st, err)
	}
	return protocol.EncodeResponse(resp)
}

// Serve serves p to the host over gRPC (go-plugin) and returns when the host is
// done with it. p must implement at least one of Initialiser, Renderer, Deployer
// and Validator. Run by hand rather than by kubeplug, the binary says so and exits
// with status 1.
func Serve(p any) {
	h, err := Handler(p)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{wire.ProtocolVersion: {wire.PluginName: &wire.Plugin{Handler: h}}},
		GRPCServer:       goplugin.DefaultGRPCServer,
		Logger:           ServeLogger(),
	})
}

// ServeLogger returns go-plugin's logger for a plugin process: errors only, so
// the host's log holds what the plugin says rather than go-plugin's start-up chatter.
func ServeLogger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "go-plugin", Level: hclog.Error, Output: os.Stderr, JSONFormat: true})
}

// ServeExec answers one stage under the exec protocol: it reads the request from
// r, writes the answer to w and returns the process's exit status (0, or 1 after
// printing the error to stderr). It lets a Go plugin be packaged as
// `spec.runtime.type: exec` too:
//
//	func main() { os.Exit(sdk.ServeExec(context.Background(), P{}, os.Stdin, os.Stdout)) }
func ServeExec(ctx context.Context, p any, r io.Reader, w io.Writer) int {
	if err := serveExec(ctx, p, r, w); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func serveExec(ctx context.Context, p any, r io.Reader, w io.Writer) error {
	if _, err := Handler(p); err != nil {
		return err
	}
	in, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	req, err := protocol.DecodeRequest(in)
	if err != nil {
		return err
	}
	out, err := answer(ctx, p, req.Stage, in)
	if err != nil {
		return err
	}
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	return nil
}
