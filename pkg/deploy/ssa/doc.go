// Package ssa applies objects with server-side apply, waits for them and deletes
// them: the object-level work of a deploy wave, without knowing of plugins'
// records or Helm.
//
// Apply and ApplyAll apply under the "kubeplug" field manager (forcing conflicts
// only when told to). Every ApplyAll call of an Applier shares one pipe of
// Options.Concurrency applies in flight; a place that frees up goes to the
// waiting call of the highest priority (the caller's: the deployer gives it to
// plugins others wait for), the first come among equals. Order is the table of rules that puts a wave's objects in
// stages (CustomResourceDefinitions and Namespaces first, APIServices and webhook
// configurations last) and DeleteAll deletes in the reverse of it. Objects the
// cluster already holds as desired need no request at all: Prepare returns the
// digest of an object's content (Digest), which the caller keeps (the release
// record does, not the object: what is applied is the plugin's content and its
// plugin label only), and Unchanged compares the live object LiveObjects read
// with what is desired once the digest last applied is the one desired now. An
// object still at the resourceVersion recorded when it last held what is
// desired, ready, is not even read: LiveObjects lists only its metadata. WaitEstablished waits for CRDs before their custom
// resources are applied; WaitReady waits until objects are Current by kstatus and
// pass the health expressions of their kind (Health).
package ssa
