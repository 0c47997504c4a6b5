// Package provider is the contract between kubeplug's up/down actions and what
// brings machines and a control plane to the state a render describes.
//
// A Provider takes a Desired (the finished model and the rendered machines),
// makes the world match it in Up, runs the nodes' afterDeploy hooks in
// AfterDeploy once the Kubernetes content is deployed, and tears the cluster
// down in Down. The one idea: Up is idempotent and converging — on a running
// cluster it applies only the difference, so `kubeplug up` is also the command
// that changes a cluster.
//
// The local provider (package local) is the default: a real control plane on
// loopback with simulated kubelets, one directory per node as the machine.
package provider
