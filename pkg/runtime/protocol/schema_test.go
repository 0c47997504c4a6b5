package protocol_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"
	sjsonschema "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/runtime/protocol"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

var update = flag.Bool("update", false, "rewrite docs/schemas from the Go types")

// schemas are the exec protocol's JSON Schemas, generated from the Go types so
// that docs/schemas cannot drift from what the host sends and accepts.
var schemas = []struct {
	file, id, title string
	v               any
}{
	{"exec-request.schema.json", "https://kubeplug.dev/schemas/exec/v1/request.schema.json", "kubeplug exec protocol v1 request", &protocol.Request{}},
	{"exec-response.schema.json", "https://kubeplug.dev/schemas/exec/v1/response.schema.json", "kubeplug exec protocol v1 response", &protocol.Response{}},
}

func generate(t *testing.T, v any, id, title string) []byte {
	t.Helper()
	// Only fields tagged required are required: the schema describes messages
	// (where absent and empty mean the same), not files a user writes.
	r := &jsonschema.Reflector{RequiredFromJSONSchemaTags: true, Namer: name}
	// AddGoComments names a package by joining base with a directory relative to
	// this one; base is therefore this package's own import path.
	const base = "github.com/kubeplug/kubeplug/pkg/runtime/protocol"
	for _, dir := range []string{".", "../../stage", "../../model", "../../../api/v1alpha1"} {
		if err := r.AddGoComments(base, dir); err != nil {
			t.Fatal(err)
		}
	}
	s := r.Reflect(v)
	s.ID = jsonschema.ID(id)
	s.Title = title
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// name names a definition after its Go type, spelling a generic's type argument
// into the name (SettingString, not "Setting[string]", which a $ref would carry).
func name(t reflect.Type) string {
	n := t.Name()
	i := strings.IndexByte(n, '[')
	if i < 0 {
		return n
	}
	arg := n[i+1 : len(n)-1]
	arg = arg[strings.LastIndexByte(arg, '.')+1:]
	if arg == "interface {}" || arg == "any" {
		arg = "Any"
	}
	return n[:i] + strings.ToUpper(arg[:1]) + arg[1:]
}

// TestSchemasCurrent keeps docs/schemas in step with the Go types.
// Regenerate with: go test ./pkg/runtime/protocol -run TestSchemasCurrent -update
func TestSchemasCurrent(t *testing.T) {
	for _, tc := range schemas {
		t.Run(tc.file, func(t *testing.T) {
			got := generate(t, tc.v, tc.id, tc.title)
			path := filepath.Join("..", "..", "..", "docs", "schemas", tc.file)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s is stale; run: go test ./pkg/runtime/protocol -run TestSchemasCurrent -update", path)
			}
		})
	}
}

// TestSchemasAcceptTheMessages checks the schemas against real messages, so that
// a schema that compiles but rejects what the host sends is caught.
func TestSchemasAcceptTheMessages(t *testing.T) {
	req, err := protocol.EncodeRequest(&stage.Request{
		Stage: stage.Initialise, Plugin: "p",
		Cluster: &v1alpha1.Cluster{APIVersion: "kubeplug.dev/v1alpha1", Kind: "Cluster", Metadata: v1alpha1.ClusterMetadata{Name: "c"}, Spec: v1alpha1.ClusterSpec{KubernetesVersion: "1.36.3"}}, Version: "1.0.0", Values: map[string]any{"a": 1},
		Plugins: map[string]stage.PluginValues{"p": {Version: "1.0.0", Values: map[string]any{"a": 1}}},
		Model:   model.New(model.PoolSpec{Name: "workers", Role: model.RoleWorker, Count: 1}),
	})
	if err != nil {
		t.Fatal(err)
	}
	resp := []byte(`{"protocolVersion":"kubeplug.dev/exec/v1","contribution":{"controlPlane":{"components":{"kube-apiserver":{"flags":{"v":{"value":"2"}}}}}},"diagnostics":[{"severity":"warning","message":"m"}]}`)
	bad := []byte(`{"protocolVersion":"kubeplug.dev/exec/v1","diagnostics":[{"severity":"error","message":"m"}]}`)
	for _, tc := range []struct {
		file string
		doc  []byte
		ok   bool
	}{
		{schemas[0].file, req, true},
		{schemas[1].file, resp, true},
		{schemas[1].file, protocol.EncodeUnsupported(), true},
		{schemas[1].file, bad, false},
	} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "schemas", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := sjsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		c := sjsonschema.NewCompiler()
		if err := c.AddResource(tc.file, doc); err != nil {
			t.Fatal(err)
		}
		s, err := c.Compile(tc.file)
		if err != nil {
			t.Fatalf("compile %s: %v", tc.file, err)
		}
		inst, err := sjsonschema.UnmarshalJSON(bytes.NewReader(tc.doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(inst); (err == nil) != tc.ok {
			t.Errorf("%s on %s: valid=%v, want %v (%v)", tc.file, tc.doc, err == nil, tc.ok, err)
		}
	}
}
