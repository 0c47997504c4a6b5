// Package deploy brings plugins' Kubernetes content into a running cluster and
// keeps it there.
//
// A Deployer applies a wave of plugins (ApplyWave), or one plugin as a wave of one
// for a caller that schedules each plugin on its own (ApplyUnit), with
// server-side apply under the "kubeplug" field manager: within a wave, stage by stage as the rules of ssa.Order
// say — CustomResourceDefinitions and Namespaces first (waiting until the CRDs are
// Established), then every other object, then APIServices and webhook
// configurations — each stage concurrently through a client tuned for it. It then waits until each plugin's
// objects are Current (kstatus), so that a plugin's dependents, in later waves, only
// start once it is ready (ApplyUnit says when, before it prunes and records).
// Units applied at once share one pipe of applies, in which the objects of the
// unit of the highest Unit.Priority go first (the CLI's scheduler gives it to
// the plugins others wait for). A plugin may add health checks: CEL expressions over the
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
// Every plugin has a release record in the cluster: a history of revisions, each
// a Secret of type kubeplug.dev/release.v1 in kubeplug-system holding the version,
// package digest, values digest (never the values), whether that version declared
// downgrades safe, the inventory (every object the plugin owns, its Helm releases
// and the Helm revision each was at), the phase and diagnostics of its run and
// when it started and finished; the objects the revision applied are gzipped, in
// the head itself when small (state.InlineMax), else into chunk Secrets of at most
// 512 KiB, so a release of any size fits. Chunks are named by their content and
// written before the head that names them, and chunks no head names are collected
// on the next write, so a reader never sees half a revision. The record, not the
// object, keeps the digest of the content last applied to each object (what is
// applied is the plugin's content and one label, kubeplug.dev/plugin, naming
// the plugin): an object whose recorded digest is that of the content desired
// now and whose live fields hold it is not applied again. A revision being
// applied keeps no digest for an object it changes until it is Ready, so a run
// killed at any point leaves no digest an object does not hold; objects of an
// earlier kubeplug, which kept the digest in an annotation, are applied once
// more, which removes it. A Ready revision
// also keeps the resourceVersion at which each object was as applied and ready: a
// re-apply lists the objects' metadata only and neither reads, applies nor waits
// for those still at it with the desired digest. The newest revision's inventory is widened to old ∪ new before
// anything is applied and narrowed only after the objects the new content no
// longer produces were pruned, so a run killed at any point leaves a record that
// covers everything the plugin may own, and the next run converges. A changed
// version, package, values or content is a new revision (history bounded by
// Options.HistoryMax); a re-apply that changes nothing writes nothing. A version
// lower than the installed one is refused before anything changes, unless
// Options.AllowDowngrade or the installed version declared it safe. Rollback
// applies a recorded revision's objects again, prunes what it did not have, rolls
// the Helm releases back to the revisions it recorded and records a new revision;
// with Options.RollbackOnFailure a plugin that does not become ready is rolled
// back to its previous Ready revision, or uninstalled when it was new. The
// ConfigMap inventories of earlier kubeplug versions are read as revision 1 and
// replaced at the next apply. Uninstall needs nothing but the records: it removes
// plugins in reverse dependency order and refuses to remove a plugin an installed
// plugin still requires.
//
// The Deployer is a thin orchestrator over packages that each own one
// responsibility: ssa (apply, ordering, wait, prune), helm (Helm releases), crd
// (CRD upgrade safety), drift, and state (the release records, behind the
// state.Store interface; Options.Store replaces the Secrets the CLI keeps), all on
// the clients of kube. One wave's work is the wave type, whose phases ApplyWave
// runs in order. Taking the cluster's operation lease is not the deployer's
// concern but its callers' (pkg/lease).
package deploy
