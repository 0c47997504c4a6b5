package grpc

import "github.com/kubeplug/kubeplug/pkg/runtime/wire"

// The wire contract lives in pkg/runtime/wire, which the SDK links; these names keep
// the host's API in one place.
const (
	PluginName           = wire.PluginName
	ProtocolVersion      = wire.ProtocolVersion
	ServiceName          = wire.ServiceName
	SupportedSDKVersions = wire.SupportedSDKVersions
)

// Handshake is the go-plugin handshake.
var Handshake = wire.Handshake

type (
	// Info describes a plugin.
	Info = wire.Info
	// Handler is the plugin side of the service.
	Handler = wire.Handler
	// Plugin is the go-plugin definition of the service.
	Plugin = wire.Plugin
)
