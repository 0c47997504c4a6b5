// Package state keeps plugins' release records: per plugin, a history of
// revisions, each saying what kubeplug applied (version, package, values and
// content digests, the inventory of objects and Helm releases), with what result,
// and holding the objects it applied so it can be restored.
//
// Records are kept behind Store, a small interface: read a plugin's history or
// every plugin's newest revision, write a revision (with the objects it applied,
// or its head only), read a revision's objects back, delete a plugin's records.
// Secrets is the Store the CLI uses: each revision is a head Secret in the
// cluster's kubeplug-system namespace holding its gzipped objects when they are
// small, else naming chunk Secrets that hold them, written so that a reader sees
// a revision whole or not at all; it remembers what it read and wrote, so that a
// run's writes need no LIST to clean up after themselves. A controller can keep the
// same Records elsewhere (a custom resource's status, its objects in an OCI
// artifact) by implementing Store; the deployer needs nothing else.
package state
