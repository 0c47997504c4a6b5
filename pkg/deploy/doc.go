// Package deploy brings plugins' Kubernetes content into a running cluster and
// keeps it there.
//
// A Deployer applies one wave of plugins at a time with server-side apply under the
// "kubeplug" field manager: within a wave, CustomResourceDefinitions and Namespaces
// first (waiting until the CRDs are Established), then every other object, all
// concurrently through a client tuned for it. It then waits until each plugin's
// objects are Current (kstatus), so that a plugin's dependents, in later waves, only
// start once it is ready. A plugin may add health checks: CEL expressions over the
// live object, per kind, that must hold too.
//
// A plugin's Helm releases are installed after its objects through the Helm SDK, as
// real releases whose records live in the cluster (helm list shows them): installed
// when absent, upgraded only when the chart or values differ from the deployed
// revision, and waited for like any other object, through the objects of the release
// manifest. A release whose objects do not become ready is rolled back (or
// uninstalled when it was new) with Options.RollbackOnFailure, else marked failed. A
// release a crashed run left pending-* is rolled back to its last good revision, or
// uninstalled when it has none, before it is touched again.
//
// Every plugin has an inventory in the cluster: a ConfigMap in kubeplug-system that
// lists what the plugin applied (its Helm releases and their objects included), at
// which version and with which values digest. The
// inventory is widened to old ∪ new before anything is applied and narrowed to new
// only after the objects the new version no longer produces were pruned, so a run
// killed at any point leaves an inventory that covers everything the plugin may own,
// and the next run converges. Uninstall removes plugins in reverse dependency order
// and refuses to remove a plugin an installed plugin still requires.
package deploy
