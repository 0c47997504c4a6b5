// Package hosts is the provider that builds a cluster on Linux hosts that
// already exist, reached over SSH (spec.provider.hosts, docs/hosts.md).
//
// It never shells out to ssh: golang.org/x/crypto/ssh connects, with the
// user's key file and/or SSH agent, through an optional jump host, and checks
// every host key against a known_hosts file — strictly: an unknown key is
// refused naming its SHA256 fingerprint unless AcceptNewHostKeys is set (then
// it is added to the file), and a changed key is always refused.
//
// Delivery: the provider is the one interpreter of a pool's rendered
// cloud-init file (nodes/<pool>/cloud-init.yaml) on a host. It reads its
// write_files and runcmd — the only keys render writes; any other key is
// refused — uploads each file (and the node programs the file's units run:
// the node agent, containerd, the kubelet) through sudo, verifies each upload
// by its SHA-256 computed on the host, and runs runcmd in order. The host's
// cloud-init, when it has one, is not involved: its own instance (and host
// keys) are left alone. A re-run asks the host for the digests of every file
// and does nothing when they all match.
//
// Changes (roll.go, remove.go): a host whose delivered list differs from its
// files now is rolled, one host at a time after the others are Ready —
// cordon, drain, deliver, restart what changed and the pool's units, the Node
// registered anew, Ready, uncordon — and a host removed from the spec (the
// state directory's hosts.json remembers it) is drained, its Node deleted and
// the host cleaned. The spec's own rules are a config.ProviderCheck, so the
// cluster file's check reports them at their line.
package hosts
