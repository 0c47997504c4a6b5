// Package protocol is the JSON message format between kubeplug and a plugin's
// code: one request per stage call, one response. The exec runtime sends it on
// stdin and reads it from stdout; the gRPC runtime carries the same bytes in a
// BytesValue, so a plugin's messages are the same whichever runtime runs it.
//
// Hosts decode responses strictly (unknown fields are errors); plugins should
// decode requests leniently, since a host may add optional fields within a
// version. docs/plugin-protocol.md describes the protocol for authors in any
// language and docs/schemas holds its JSON Schemas.
package protocol
