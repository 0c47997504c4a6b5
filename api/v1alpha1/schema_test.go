package v1alpha1

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/invopop/jsonschema"
)

var update = flag.Bool("update", false, "rewrite the checked-in schemas from the Go types")

// TestSchemasCurrent keeps schemas/ in step with the Go types: the schemas are what
// kubeplug validates against, so a type change without a regenerated schema fails here.
// Regenerate with: go test ./api/v1alpha1 -run TestSchemasCurrent -update
func TestSchemasCurrent(t *testing.T) {
	for _, tc := range []struct {
		file, id, title string
		v               any
		embedded        []byte
	}{
		{"plugin.schema.json", PluginSchemaID, "kubeplug plugin.yaml", &Plugin{}, PluginSchema()},
		{"cluster.schema.json", ClusterSchemaID, "kubeplug cluster.yaml", &Cluster{}, ClusterSchema()},
		{"expansion.schema.json", ExpansionSchemaID, "kubeplug expansion.yaml", &Expansion{}, ExpansionSchema()},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r := &jsonschema.Reflector{}
			if err := r.AddGoComments("github.com/kubeplug/kubeplug/api/v1alpha1", "."); err != nil {
				t.Fatal(err)
			}
			s := r.Reflect(tc.v)
			s.ID = jsonschema.ID(tc.id)
			s.Title = tc.title
			got, err := json.MarshalIndent(s, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("schemas", tc.file)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !bytes.Equal(got, tc.embedded) {
				t.Fatalf("%s is stale; run: go test ./api/v1alpha1 -run TestSchemasCurrent -update", path)
			}
		})
	}
}
