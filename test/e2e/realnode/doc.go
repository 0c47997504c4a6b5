// Package realnode is the end-to-end test of the local provider's real nodes
// (spec.provider.local.realPools): a cluster brought up through the CLI whose
// workload really runs — logs, exec, Services, restarts, a plugin's kubelet
// setting — and whose `down` leaves nothing behind.
package realnode
