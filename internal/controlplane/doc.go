// Package controlplane runs a real Kubernetes control plane on this machine, on
// loopback only: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok, whose simulated kubelets make Nodes Ready, Pods Running and Ready,
// Deployments Available and Jobs Complete without containers.
//
// It is what kubeplug's tests apply, wait, prune and reconcile against, and what
// the `local` provider will start with the plugins' API server flags in effect.
// The components are the upstream Go code, built into one multicall binary by the
// separate module in ./localcluster (`make localcluster`); this package only
// finds that binary, generates certificates and a kubeconfig, starts the
// processes with free loopback ports, waits until the cluster is usable and stops
// everything again.
//
// The one idea to keep in mind: every component is a child process in its own
// process group, started from a dedicated OS thread with a parent-death signal, so
// that nothing survives the caller — not even if the test binary is SIGKILLed.
//
//	cp, err := controlplane.Start(ctx, controlplane.Options{Logger: log})
//	if err != nil { ... }
//	defer cp.Stop(context.Background())
//	_, err = cp.AddNodes(ctx, 3, controlplane.NodeOptions{})
//	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
package controlplane
