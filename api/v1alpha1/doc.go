// Package v1alpha1 holds kubeplug's file formats: Plugin (plugin.yaml) and Cluster
// (cluster.yaml).
//
// The Go types are the single source of truth. The JSON Schemas under schemas/ are
// generated from them (see GenerateSchemas and `go test ./api/... -update`) and are what
// kubeplug validates every file against before decoding it, so editors using
// yaml-language-server and kubeplug itself agree on what a valid file is.
//
// Strings inside Plugin.Spec.Contributes are Go text/templates rendered by the engine;
// the types therefore keep templated leaves as strings.
package v1alpha1
