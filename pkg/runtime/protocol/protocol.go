package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// Version names the JSON envelope. A host refuses a response carrying any other
// version; a plugin should refuse a request carrying one it does not know. A
// backwards-compatible change (a new optional request field) keeps the version; any
// other change is a new version that hosts and plugins must negotiate.
const Version = "kubeplug.dev/exec/v1"

// ExitUnsupported is the exit status by which an exec plugin that printed nothing
// says it does not implement the requested stage.
const ExitUnsupported = 3

// ErrProtocol is wrapped by every error that says a message broke the protocol.
var ErrProtocol = errors.New("protocol violation")

// Request is the JSON a plugin receives for one stage: the protocol version and
// the engine's request.
type Request struct {
	// ProtocolVersion is always Version.
	ProtocolVersion string `json:"protocolVersion" jsonschema:"required,enum=kubeplug.dev/exec/v1"`
	stage.Request
}

// Response is the JSON a plugin answers with.
type Response struct {
	// ProtocolVersion must be Version.
	ProtocolVersion string `json:"protocolVersion" jsonschema:"required,enum=kubeplug.dev/exec/v1"`
	// Unsupported says the plugin does not implement the stage; the host treats it
	// as an empty answer. Contribution and diagnostics must then be empty.
	Unsupported bool `json:"unsupported,omitempty"`
	// Contribution is merged into the model.
	Contribution *model.Contribution `json:"contribution,omitempty"`
	// Values, at initialise, are the plugin's initialised values, merged over
	// its values and checked against its schema again (stage.Response.Values).
	Values map[string]any `json:"values,omitempty"`
	// Diagnostics are the plugin's findings; a fatal one stops the run after the stage.
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
}

// Diagnostic is one finding of a plugin. The host fills in the plugin's name.
type Diagnostic struct {
	// Severity is fatal (stops the run after the stage) or warning.
	Severity string `json:"severity" jsonschema:"required,enum=fatal,enum=warning"`
	// File, Line and Column optionally locate the problem in the plugin's input.
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty" jsonschema:"minimum=0"`
	Column int    `json:"column,omitempty" jsonschema:"minimum=0"`
	// Field is the path of the offending field, for example values.replicas.
	Field string `json:"field,omitempty"`
	// Message says what was expected and what was found.
	Message string `json:"message" jsonschema:"required,minLength=1"`
}

// EncodeRequest returns req as the JSON envelope. Absent values, pool values and
// plugins are sent as empty objects, never null, so that plugins in any language
// can index them without checking.
func EncodeRequest(req *stage.Request) ([]byte, error) {
	r := *req
	if r.Values == nil {
		r.Values = map[string]any{}
	}
	if r.PoolValues == nil {
		r.PoolValues = map[string]map[string]any{}
	}
	if r.Plugins == nil {
		r.Plugins = map[string]stage.PluginValues{}
	}
	b, err := json.Marshal(Request{ProtocolVersion: Version, Request: r})
	if err != nil {
		return nil, fmt.Errorf("encode %s request: %w", req.Stage, err)
	}
	return b, nil
}

// DecodeRequest reads a request envelope. Unknown fields are ignored so that a host
// may add optional fields without breaking plugins; the version must match.
func DecodeRequest(b []byte) (*stage.Request, error) {
	var r Request
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: request is not valid JSON: %w", ErrProtocol, err)
	}
	if r.ProtocolVersion != Version {
		return nil, fmt.Errorf("%w: request protocolVersion is %q, this plugin speaks %q", ErrProtocol, r.ProtocolVersion, Version)
	}
	return &r.Request, nil
}

// EncodeResponse returns resp as the JSON envelope; a nil resp is an empty answer.
func EncodeResponse(resp *stage.Response) ([]byte, error) {
	out := Response{ProtocolVersion: Version}
	if resp != nil {
		out.Contribution, out.Values = resp.Contribution, resp.Values
		for _, d := range resp.Diagnostics {
			out.Diagnostics = append(out.Diagnostics, Diagnostic{
				Severity: d.Severity.String(), File: d.File, Line: d.Line, Column: d.Column, Field: d.Field, Message: d.Message,
			})
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode response: %w", err)
	}
	return b, nil
}

// EncodeUnsupported returns the answer of a plugin that does not implement a stage.
func EncodeUnsupported() []byte {
	b, _ := json.Marshal(Response{ProtocolVersion: Version, Unsupported: true}) // cannot fail
	return b
}

// DecodeResponse reads a response envelope strictly: exactly one JSON object, no
// unknown fields, the right version and valid severities, since a plugin that says
// more or other than the protocol allows is more likely broken than ahead of us. It
// returns a nil response for an unsupported stage.
func DecodeResponse(b []byte) (*stage.Response, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%w: empty response", ErrProtocol)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r Response
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: response is not a valid %s message: %w", ErrProtocol, Version, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: response has data after its JSON object", ErrProtocol)
	}
	if r.ProtocolVersion != Version {
		return nil, fmt.Errorf("%w: response protocolVersion is %q, expected %q", ErrProtocol, r.ProtocolVersion, Version)
	}
	if r.Unsupported {
		if r.Contribution != nil || len(r.Diagnostics) > 0 || r.Values != nil {
			return nil, fmt.Errorf("%w: an unsupported answer carries a contribution or diagnostics", ErrProtocol)
		}
		return nil, nil
	}
	resp := &stage.Response{Contribution: r.Contribution, Values: r.Values}
	for i, d := range r.Diagnostics {
		var sev diag.Severity
		switch d.Severity {
		case "fatal":
			sev = diag.Fatal
		case "warning":
			sev = diag.Warning
		default:
			return nil, fmt.Errorf("%w: diagnostics[%d].severity: expected fatal or warning, found %q", ErrProtocol, i, d.Severity)
		}
		if d.Message == "" {
			return nil, fmt.Errorf("%w: diagnostics[%d].message is empty", ErrProtocol, i)
		}
		// Plugin is left empty: the engine names the plugin that answered, so a
		// plugin cannot blame another.
		resp.Diagnostics = append(resp.Diagnostics, diag.Diagnostic{
			Severity: sev, File: d.File, Line: d.Line, Column: d.Column, Field: d.Field, Message: d.Message,
		})
	}
	return resp, nil
}
