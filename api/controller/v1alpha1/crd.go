package v1alpha1

import (
	"embed"
	"io/fs"
	"slices"
)

//go:embed crds/*.yaml
var crdFiles embed.FS

// CRDs returns the CustomResourceDefinitions of the controller's resources
// (PluginCatalog, PluginInstallation, TargetCluster, PluginRollout,
// ManagedCluster), generated
// from this package's types, one YAML document each, sorted by file name.
func CRDs() [][]byte {
	names, _ := fs.Glob(crdFiles, "crds/*.yaml")
	slices.Sort(names)
	out := make([][]byte, 0, len(names))
	for _, n := range names {
		b, _ := crdFiles.ReadFile(n) // embedded: cannot fail
		out = append(out, b)
	}
	return out
}
