// Package config reads cluster.yaml and computes every enabled plugin's effective
// values.
//
// Load checks the file against the schema generated from api/v1alpha1.Cluster and
// then its meaning (versions, references between pools and plugins, value sources),
// reporting every problem at once as FILE:LINE:COL with the field path. Values checks
// each plugin's merged values against the plugin's schema and reports a violation at
// the layer the offending value came from: the cluster file, a valuesFrom file, an
// environment variable's entry, or the plugin's defaults.
package config
