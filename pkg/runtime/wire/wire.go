package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	goplugin "github.com/hashicorp/go-plugin"
	ggrpc "google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/kubeplug/kubeplug/pkg/stage"
)

// Wire constants shared by the host and the SDK.
const (
	// PluginName is the name the plugin is dispensed under.
	PluginName = "kubeplug"
	// ProtocolVersion is the go-plugin protocol version this package speaks; a
	// future incompatible service is version 2, offered alongside it.
	ProtocolVersion = 1
	// ServiceName is the gRPC service.
	ServiceName = "kubeplug.runtime.v1.Plugin"
	// SupportedSDKVersions is the range of SDK versions this host accepts.
	SupportedSDKVersions = ">= 0.1.0, < 1.0.0"
)

// Handshake is the go-plugin handshake. The cookie is not a secret; it tells a
// user who starts a plugin binary by hand that it is meant to be run by kubeplug.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "KUBEPLUG_PLUGIN_COOKIE",
	MagicCookieValue: "d2a9c7e4-kubeplug-plugin-v1",
}

// Info describes a plugin, answered by its Info RPC.
type Info struct {
	// SDKVersion is the semantic version of the SDK the plugin was built with.
	SDKVersion string `json:"sdkVersion"`
	// Stages are the stages the plugin implements.
	Stages []stage.Stage `json:"stages"`
}

// Handler is the plugin side of the service; the SDK implements it.
type Handler interface {
	// Info describes the plugin.
	Info(ctx context.Context) (*Info, error)
	// Stage answers one stage. req and the answer are protocol envelopes (JSON); a
	// stage the plugin does not implement answers protocol.EncodeUnsupported(). An
	// error means the plugin could not answer at all; the host makes it fatal.
	Stage(ctx context.Context, stage stage.Stage, req []byte) ([]byte, error)
}

// Plugin is the go-plugin definition of the service, for both sides: the host
// leaves Handler nil, a plugin sets it.
type Plugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Handler Handler
}

var _ goplugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers the service.
func (p *Plugin) GRPCServer(_ *goplugin.GRPCBroker, s *ggrpc.Server) error {
	if p.Handler == nil {
		return fmt.Errorf("serve %s: no handler", ServiceName)
	}
	s.RegisterService(&serviceDesc, p.Handler)
	return nil
}

// GRPCClient returns the host's client of the service.
func (p *Plugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, conn *ggrpc.ClientConn) (any, error) {
	return &Client{conn: conn}, nil
}

// Method returns the RPC name of a stage: Initialise, Render, Deploy, Validate.
func Method(st stage.Stage) string {
	s := string(st)
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

var serviceDesc = func() ggrpc.ServiceDesc {
	d := ggrpc.ServiceDesc{
		ServiceName: ServiceName,
		HandlerType: (*Handler)(nil),
		Metadata:    "kubeplug/runtime/v1/plugin.proto",
		Methods: []ggrpc.MethodDesc{{
			MethodName: "Info",
			Handler: unary("Info", func(ctx context.Context, h Handler, _ []byte) ([]byte, error) {
				info, err := h.Info(ctx)
				if err != nil {
					return nil, err
				}
				return json.Marshal(info)
			}),
		}},
	}
	for _, st := range stage.Stages {
		d.Methods = append(d.Methods, ggrpc.MethodDesc{
			MethodName: Method(st),
			Handler: unary(Method(st), func(ctx context.Context, h Handler, req []byte) ([]byte, error) {
				return h.Stage(ctx, st, req)
			}),
		})
	}
	return d
}()

// unary adapts f to a gRPC method handler taking and returning a BytesValue.
func unary(name string, f func(ctx context.Context, h Handler, req []byte) ([]byte, error)) func(any, context.Context, func(any) error, ggrpc.UnaryServerInterceptor) (any, error) {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor ggrpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.BytesValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		call := func(ctx context.Context, req any) (any, error) {
			out, err := f(ctx, srv.(Handler), req.(*wrapperspb.BytesValue).GetValue())
			if err != nil {
				return nil, err
			}
			return wrapperspb.Bytes(out), nil
		}
		if interceptor == nil {
			return call(ctx, in)
		}
		return interceptor(ctx, in, &ggrpc.UnaryServerInfo{Server: srv, FullMethod: "/" + ServiceName + "/" + name}, call)
	}
}

// Client is the host's side of the service.
type Client struct {
	conn *ggrpc.ClientConn
}

// Invoke calls the RPC name with a request envelope and returns the answer.
func (c *Client) Invoke(ctx context.Context, name string, req []byte) ([]byte, error) {
	out := new(wrapperspb.BytesValue)
	if err := c.conn.Invoke(ctx, "/"+ServiceName+"/"+name, wrapperspb.Bytes(req), out); err != nil {
		return nil, err
	}
	return out.GetValue(), nil
}

// Info asks the plugin to describe itself.
func (c *Client) Info(ctx context.Context) (*Info, error) {
	b, err := c.Invoke(ctx, "Info", nil)
	if err != nil {
		return nil, err
	}
	var info Info
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, fmt.Errorf("decode plugin info: %w", err)
	}
	return &info, nil
}
