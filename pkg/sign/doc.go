// Package sign signs plugin package archives with a key pair and verifies them,
// offline: no transparency log, no certificate authority.
//
// The format is cosign's, so that tools outside kubeplug can check what kubeplug
// signed: keys are ECDSA P-256 in the PEM files `cosign generate-key-pair` writes
// (an "ENCRYPTED SIGSTORE PRIVATE KEY", scrypt and secretbox, or an unencrypted
// PKCS#8 "PRIVATE KEY" for CI; a "PUBLIC KEY"), and a signature is the base64 ASN.1
// ECDSA signature of the SHA-256 of the archive's bytes, as `cosign sign-blob`
// writes it. A detached signature lives beside its archive as ARCHIVE.sig ([SigExt]);
// `cosign verify-blob --key kubeplug.pub --signature demo-0.1.0.tgz.sig
// --insecure-ignore-tlog demo-0.1.0.tgz` accepts it.
//
// Archives are deterministic (package archive), so the archive's bytes stand for
// the package digest the lock pins: the same tree always gives the same archive
// and the same signed bytes.
//
// Why cosign's format and not notation's: notation verifies signatures only through
// X.509 certificate chains in a trust store, so a plain key pair would need a
// self-made CA; cosign verifies a bare public key, which is what an author offline
// has, and its blob signatures are what sigstore's Go library writes.
package sign
