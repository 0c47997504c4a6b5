// Package clusterpki makes and reads a cluster's PKI directory: the cluster CA,
// the front proxy's CA, the API server's and the components' serving
// certificates, the cluster-admin certificate and its kubeconfig, the
// service-account key pair, the client certificates of nodes' kubelets and
// kube-proxies, and a stacked control plane's etcd peer PKI.
//
// It is shared by the providers that make their own control plane: the local
// one (for its control-plane runner and machines), the hosts one and the aws
// one (for the boot files of their hosts and instances). It lives under
// pkg/provider/internal because only providers use it, and no provider may
// import another (test/archtest: TestProvidersImportNoOtherProvider).
//
// The invariant: an existing identity is kept. EnsurePKI leaves a complete
// directory as it is and, given only IdentityFiles (a restore), makes the
// leaves anew under the same CAs; IssueClientCert keeps an existing pair; so a
// re-run hands out the same bytes and clients, kubeconfigs and stored
// service-account tokens stay valid.
package clusterpki
