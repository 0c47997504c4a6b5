// Package deploy brings plugins' Kubernetes content into a running cluster and
// keeps it there.
//
// A Deployer applies one wave of plugins at a time with server-side apply under the
// "kubeplug" field manager: within a wave, CustomResourceDefinitions and Namespaces
// first (waiting until the CRDs are Established), then every other object, all
// concurrently through a client tuned for it. It then waits until each plugin's
// objects are Current (kstatus), so that a plugin's dependents, in later waves, only
// start once it is ready.
//
// Every plugin has an inventory in the cluster: a ConfigMap in kubeplug-system that
// lists what the plugin applied, at which version and with which values digest. The
// inventory is widened to old ∪ new before anything is applied and narrowed to new
// only after the objects the new version no longer produces were pruned, so a run
// killed at any point leaves an inventory that covers everything the plugin may own,
// and the next run converges. Uninstall removes plugins in reverse dependency order
// and refuses to remove a plugin an installed plugin still requires.
package deploy
