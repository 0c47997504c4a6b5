package v1alpha1

import (
	_ "embed"
	"slices"
)

// Schema IDs, also the names yaml-language-server users point at.
const (
	PluginSchemaID  = "https://kubeplug.dev/schemas/v1alpha1/plugin.schema.json"
	ClusterSchemaID = "https://kubeplug.dev/schemas/v1alpha1/cluster.schema.json"
)

//go:embed schemas/plugin.schema.json
var pluginSchema []byte

//go:embed schemas/cluster.schema.json
var clusterSchema []byte

// PluginSchema returns the JSON Schema of plugin.yaml, generated from Plugin.
func PluginSchema() []byte { return slices.Clone(pluginSchema) }

// ClusterSchema returns the JSON Schema of cluster.yaml, generated from Cluster.
func ClusterSchema() []byte { return slices.Clone(clusterSchema) }
