// Package testcluster gives tests a real Kubernetes API server with simulated
// nodes, started once per test package, and a fresh namespace per test.
//
// It is a thin layer over pkg/provider/local/controlplane for the common case:
//
//	func TestMain(m *testing.M) { os.Exit(testcluster.Run(m)) }
//
//	func TestApply(t *testing.T) {
//		ns := testcluster.Namespace(t)
//		client := testcluster.Client(t)
//		...
//	}
//
// Tests that break the cluster on purpose (restarting the API server, killing
// etcd) take a cluster of their own with Start, so they cannot disturb their
// neighbours.
//
// A missing control plane binary is a test failure, never a skip: a check that
// can silently not run is worse than no check. Build them with `make
// localcluster`, which `make test` does.
package testcluster
