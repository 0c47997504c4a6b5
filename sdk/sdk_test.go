package sdk_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/runtime/protocol"
	"github.com/kubeplug/kubeplug/pkg/stage"
	"github.com/kubeplug/kubeplug/sdk"
)

type renderOnly struct{}

func (renderOnly) Render(_ context.Context, req *sdk.Request) (*sdk.Response, error) {
	if req.Values["fail"] == true {
		return nil, errors.New("no can do")
	}
	return &sdk.Response{Diagnostics: diag.List{{Severity: diag.Warning, Message: "rendered " + req.Plugin}}}, nil
}

var _ sdk.Renderer = renderOnly{}

func encode(t *testing.T, st stage.Stage, values map[string]any) []byte {
	t.Helper()
	b, err := protocol.EncodeRequest(&stage.Request{Stage: st, Plugin: "p", Values: values, Model: model.New()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHandler(t *testing.T) {
	if _, err := sdk.Handler(struct{}{}); !errors.Is(err, sdk.ErrNoStages) {
		t.Errorf("a value with no stage: error = %v", err)
	}
	h, err := sdk.Handler(renderOnly{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := h.Info(t.Context())
	if err != nil || info.SDKVersion != sdk.Version || len(info.Stages) != 1 || info.Stages[0] != stage.Render {
		t.Errorf("info = %+v, %v", info, err)
	}
	out, err := h.Stage(t.Context(), stage.Initialise, encode(t, stage.Initialise, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := protocol.DecodeResponse(out); resp != nil || err != nil {
		t.Errorf("unimplemented stage = %+v, %v; want unsupported", resp, err)
	}
	out, err = h.Stage(t.Context(), stage.Render, encode(t, stage.Render, nil))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := protocol.DecodeResponse(out)
	if err != nil || resp.Diagnostics.String() != "warning: rendered p" {
		t.Errorf("render = %+v, %v", resp, err)
	}
	if _, err := h.Stage(t.Context(), stage.Render, encode(t, stage.Deploy, nil)); !errors.Is(err, protocol.ErrProtocol) {
		t.Errorf("a deploy request on the render RPC: error = %v", err)
	}
	if _, err := h.Stage(t.Context(), stage.Render, []byte(`{"protocolVersion":"kubeplug.dev/exec/v9"}`)); !errors.Is(err, protocol.ErrProtocol) {
		t.Errorf("an unknown protocol version: error = %v", err)
	}
}

func TestServeExec(t *testing.T) {
	var out bytes.Buffer
	if code := sdk.ServeExec(t.Context(), renderOnly{}, bytes.NewReader(encode(t, stage.Render, nil)), &out); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	if !strings.Contains(out.String(), `"message":"rendered p"`) {
		t.Errorf("stdout = %s", out.String())
	}
	out.Reset()
	if code := sdk.ServeExec(t.Context(), renderOnly{}, bytes.NewReader(encode(t, stage.Render, map[string]any{"fail": true})), &out); code != 1 || out.Len() != 0 {
		t.Errorf("a failing stage: exit status %d, stdout %q; want 1 and nothing", code, out.String())
	}
}
