// Package nodeimage builds the container images a cluster's own nodes run,
// without a container daemon: the image of one static program (BinaryImage,
// ko-style), the one image of the control plane's static Pods
// (ComponentImage: the multi-call kubeplug-localcluster with its libraries),
// and the list of built-in images the built-in plugins name (BuiltinImages).
// Images are made in memory with fixed timestamps, so the same program gives
// the same digest.
//
// Every provider that runs kubelets pushes these into its nodes' registry
// (the local provider's real nodes and machines, the hosts provider's hosts),
// and the end-to-end tests build their workloads' images with BinaryImage:
// that is why it is beside the providers rather than under
// pkg/provider/internal. No provider imports another (test/archtest:
// TestProvidersImportNoOtherProvider); what two of them share lives here,
// in pkg/provider/internal, or in pkg/provider/bootstraptoken.
package nodeimage
