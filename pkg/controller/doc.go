// Package controller is kubeplug's controller: the action layer behind
// CustomResourceDefinitions, for one cluster and for a fleet managed from one.
//
// Four resources (api/controller/v1alpha1, CRDs in its crds/):
//
//   - PluginCatalog: where packages come from (https:// and oci:// catalogs, or
//     package archives held in a ConfigMap or Secret, optionally signed).
//   - PluginInstallation: a cluster file's plugins section, kept installed in
//     one cluster — the controller's own, or a TargetCluster. Its reconciler
//     builds the cluster file in memory and runs the same action.Apply as
//     `kubeplug apply`, as the installation's owner (state.Record.Owner), so the
//     CLI's status, history, rollback and diff --live see what it installed and
//     neither removes the other's plugins. Deleting one uninstalls its plugins in
//     reverse dependency order (a finalizer).
//   - TargetCluster: another cluster, by a kubeconfig Secret; the controller
//     reads its version and whether it answers.
//   - PluginRollout: one installation per TargetCluster its selector matches,
//     moved to a new template one stage at a time (a canary, then batches),
//     halted by a cluster that fails.
//
// Each reconciler reads its resource typed (api/controller/v1alpha1, from
// controller-runtime's cache) and writes its status only through a
// statusPatcher (status.go), taken right after the read and deferred: one
// merge patch of what changed of the status, none when nothing did.
// Conditions are metav1.Conditions, set with meta.SetStatusCondition; an
// installation's and a rollout's keep kstatus' rules through progressing,
// ready, stalled and failing.
//
// The controller holds a cluster's operation lease (pkg/lease) while it
// has work for that cluster, and applies several installations under it; the
// CLI meanwhile waits for the lease or fails naming the controller. Its applies
// to one cluster share one client and one decoded view of the cluster's
// release records (state.Heads), kept current by their own writes and read
// again whenever the lease is taken anew.
//
// Replicas either elect one leader (Options.LeaderElection) or split the
// target clusters among them in shards, a Lease each (Options.Shards, see
// shards.go).
package controller
