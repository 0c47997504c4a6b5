// Command grpc-go is an example kubeplug plugin served over gRPC with the Go SDK.
// It sets the API server's max-requests-inflight from its values at initialise,
// and at validate warns when another plugin already set a lower
// max-mutating-requests-inflight. It implements no other stage.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/sdk"
)

type inflight struct{}

// The stages this plugin implements; the SDK answers the others as unsupported.
var (
	_ sdk.Initialiser = inflight{}
	_ sdk.Validator   = inflight{}
)

func (inflight) Initialise(_ context.Context, req *sdk.Request) (*sdk.Response, error) {
	n, ok := req.Values["maxRequestsInflight"].(float64)
	if !ok || n < 1 {
		return &sdk.Response{Diagnostics: diag.List{{
			Severity: diag.Fatal, Field: "values.maxRequestsInflight",
			Message: fmt.Sprintf("expected a positive number, found %v", req.Values["maxRequestsInflight"]),
		}}}, nil
	}
	slog.Info("setting max-requests-inflight", "value", n)
	return &sdk.Response{Contribution: &model.Contribution{ControlPlane: &model.ControlPlane{
		Components: map[string]*model.Component{model.KubeAPIServer: {
			Flags: map[string]model.Setting[string]{"max-requests-inflight": {Value: fmt.Sprint(n)}},
		}},
	}}}, nil
}

func (inflight) Validate(_ context.Context, req *sdk.Request) (*sdk.Response, error) {
	c := req.Model.ControlPlane.Components[model.KubeAPIServer]
	if c == nil || c.Flags["max-requests-inflight"].By != req.Plugin {
		return &sdk.Response{Diagnostics: diag.List{{Severity: diag.Warning, Message: "max-requests-inflight is not set by this plugin"}}}, nil
	}
	return nil, nil
}

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	sdk.Serve(inflight{})
}
