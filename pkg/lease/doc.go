// Package lease is the cluster's operation lease: a coordination.k8s.io Lease
// that every run changing a cluster's plugins (apply, up, uninstall, rollback)
// holds while it runs, so that two runs never change the plugins at once.
//
// Taking the lease is the concern of whoever runs an operation — the CLI's
// actions today, a controller's leader election later — not of the deployer,
// which only applies what it is given. Lock takes the lease (waiting for a holder
// to release it or for its lease to expire: a holder that died stops renewing),
// renews it in the background, and cancels the operation's context when it is
// lost. Times are judged by the API server's clock, read from the Date header of
// its responses, so hosts' clocks need not agree; every take-over and renewal is
// an update conditioned on the resourceVersion read, so two holders never both
// hold it.
//
// The Lease also remembers the cluster's name: the metadata.name of the cluster
// file last applied to it, kept when the lease is freed. It costs no request (the
// Lease is read to be taken anyway) and lets an apply tell that the current
// context is another cluster than the one its file names (Options.OtherCluster).
package lease
