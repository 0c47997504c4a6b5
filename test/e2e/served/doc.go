// Package served tests plugins that serve the Kubernetes API end to end, on the
// shared test control plane: kubeplug apply generates the certificates,
// APIService and RBAC; the example widgets API server (sdk/apiserver), run in
// this process and reached through an ExternalName Service on loopback, answers
// kubectl through the kube-apiserver with storage, authentication and
// authorization delegated to it; killed, the cluster and kubeplug keep working
// and report the plugin Degraded.
package served
