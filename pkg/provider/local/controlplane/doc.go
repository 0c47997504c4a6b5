// Package controlplane runs a real Kubernetes control plane on this machine, on
// loopback only: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok, whose simulated kubelets make Nodes Ready, Pods Running and Ready,
// Deployments Available and Jobs Complete without containers.
//
// It is what kubeplug's tests apply, wait, prune and reconcile against, and what
// the `local` provider (pkg/provider/local) starts with the plugins' flags in
// effect.
// The components are the upstream Go code, built into one multicall binary by the
// separate module in ./localcluster (`make localcluster`); this package only
// finds that binary, generates certificates and a kubeconfig, starts the
// processes on loopback ports of the cluster's port block (internal/portblock,
// docs/ports.md: ports outside the kernel's ephemeral range, one block per
// cluster on the machine, held until each component binds its port), waits until the cluster is usable and stops
// everything again.
//
// The command lines of kube-apiserver, kube-controller-manager and
// kube-scheduler are either built by Start from its defaults and
// Options.APIServerFlags and friends (what tests use), or given whole in
// Options.Args by a caller that renders them itself: the local provider runs
// the commands of the rendered static Pods. Such a caller asks ChoosePorts for
// the ports first, names them and the files of Options.PKIDir in the command
// lines, and passes them back in Options.Ports.
//
// The one idea to keep in mind: every component is a child process in its own
// process group, started from a dedicated OS thread with a parent-death signal, so
// that nothing survives the caller — not even if the test binary is SIGKILLed.
//
// The exception is Options.Detach, for a cluster that must outlive the command
// that started it (`kubeplug up`): the components get a session of their own and
// no parent-death signal, and DataDir/state.json records their pids (with their
// start times, so a reused pid is not mistaken for them), ports and command
// lines, versioned by StateVersion. Attach reconnects to such a cluster from any
// process, Reconfigure restarts only the components whose flags changed (same
// ports, same certificates), and Stop or StopDetached end it. A later detached
// Start on the same DataDir reuses the API server's port, so kubeconfigs stay
// valid; a fixed port that is taken is an ErrPortInUse naming the holder.
//
//	cp, err := controlplane.Start(ctx, controlplane.Options{Logger: log})
//	if err != nil { ... }
//	defer cp.Stop(context.Background())
//	_, err = cp.AddNodes(ctx, 3, controlplane.NodeOptions{})
//	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
package controlplane
