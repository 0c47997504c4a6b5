// Package check runs a plugin's validate checks (plugin.yaml spec.validate) against
// a running cluster, after the plugin is deployed: a wait until an object is ready
// by kstatus, a CEL expression over live objects that must be true, or an
// executable from the plugin package that must exit 0. An exec check runs with
// KUBECONFIG (the cluster), KUBEPLUG_VALUES (a file with the plugin's values as
// JSON, sensitive ones included, mode 0600), KUBEPLUG_PLUGIN and
// KUBEPLUG_CLUSTER, in a private directory removed when the check ends.
//
// Every check of a plugin runs at once, each retried until it passes or its timeout
// ends (wait 5m, expression and exec 2m by default; the caller's context deadline
// wins). A Result says how each went; Diagnostics turns failures into fatal
// diagnostics that name the plugin, the check and the last reason it failed.
package check
