package v1alpha1

import (
	_ "embed"
	"slices"
)

// Schema IDs, also the names yaml-language-server users point at.
const (
	PluginSchemaID  = "https://kubeplug.dev/schemas/v1alpha1/plugin.schema.json"
	ClusterSchemaID = "https://kubeplug.dev/schemas/v1alpha1/cluster.schema.json"
	// ExpansionSchemaID is the ID of expansion.yaml's schema.
	ExpansionSchemaID = "https://kubeplug.dev/schemas/v1alpha1/expansion.schema.json"
)

//go:embed schemas/plugin.schema.json
var pluginSchema []byte

//go:embed schemas/cluster.schema.json
var clusterSchema []byte

//go:embed schemas/expansion.schema.json
var expansionSchema []byte

// PluginSchema returns the JSON Schema of plugin.yaml, generated from Plugin.
func PluginSchema() []byte { return slices.Clone(pluginSchema) }

// ClusterSchema returns the JSON Schema of cluster.yaml, generated from Cluster.
func ClusterSchema() []byte { return slices.Clone(clusterSchema) }

// ExpansionSchema returns the JSON Schema of expansion.yaml, generated from Expansion.
func ExpansionSchema() []byte { return slices.Clone(expansionSchema) }
