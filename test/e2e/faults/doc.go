// Package faults proves that kubeplug converges after crashes: the kill -9 matrix
// kills a multi-plugin upgrade with SIGKILL at every fault point
// (internal/faultpoint) and checks that the next run converges, with no orphaned
// object, no lease left held and no Helm release left pending; an API server
// restarted in the middle of an apply; and plugins uninstalled from their release
// records after their source is gone.
//
// It builds the kubeplug CLI once and runs it against the local control plane:
//
//	go test ./test/e2e/faults
//	KUBEPLUG_FAULTS=helm:pending-recorded:1 go test ./test/e2e/faults -run Kill9 -v
package faults
