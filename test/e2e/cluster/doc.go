// Package cluster holds the CLI's end-to-end scripts that need a running cluster:
// kubeplug apply, status and uninstall against the project's local control plane,
// started once for the package, whose kubeconfig scripts find in $KUBECONFIG.
package cluster
