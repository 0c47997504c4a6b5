// Package state keeps plugins' release records: per plugin, a history of
// revisions, each saying what kubeplug applied (version, package, values and
// content digests, the inventory of objects and Helm releases), with what result,
// and holding the objects it applied so it can be restored.
//
// Records are kept behind Store, a small interface: read a plugin's history or
// every plugin's newest revision, write a revision (with the objects it applied,
// or its head only), read a revision's objects back, delete a plugin's records.
// Secrets is the Store the CLI uses: each revision is a head Secret and chunk
// Secrets of gzipped objects in the cluster's kubeplug-system namespace, written
// so that a reader sees a revision whole or not at all. A controller can keep the
// same Records elsewhere (a custom resource's status, its objects in an OCI
// artifact) by implementing Store; the deployer needs nothing else.
package state
