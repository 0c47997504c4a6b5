// Package helm brings a plugin's Helm releases to their state through the Helm
// SDK, as real releases whose records live in the cluster (helm list shows them).
//
// A release is installed when absent and upgraded only when its chart, its values
// or its post-renderer (the model's object patches to its objects, recorded on
// the release as the label PostRenderLabel) differ from the deployed revision;
// a post-renderer that is not a PostRenderDigester upgrades it on every run. Helm waits for nothing (the deployer waits
// for the objects of the manifest, with kstatus and health expressions), and what
// Helm applies is owned by the field manager HelmFieldManager, so that Helm never
// takes kubeplug's own fields away. A release a crashed run left pending-* — which
// Helm itself refuses to touch forever — is rolled back to its last good revision,
// or uninstalled when it has none, before it is touched again. Failed reverts the
// releases a failed plugin changed (RollbackOnFailure) or marks them failed so the
// next apply upgrades them even with nothing changed.
//
// What a chart's templates generate at random (genCA, randAlphaNum, …: see
// [Generators]) is kept per release, sealed, in the Secret
// GeneratedSecretPrefix+NAME of its namespace, and given to the same template
// call again on upgrade, so that an upgrade for an unrelated change leaves a
// generated CA or password as it is (helm upgrade would make new ones).
package helm
