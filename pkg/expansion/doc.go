// Package expansion reads, checks, verifies and writes expansion packages: what an
// air-gapped site needs besides its cluster file, in one directory or one tar
// archive (see docs/expansions.md).
//
// An expansion holds expansion.yaml (the manifest, [v1alpha1.Expansion]), the
// artifacts it names (plugin package archives, Helm charts, an OCI image layout
// under images/, node files, hook scripts), checksums.txt (the SHA-256 of every
// other file, in sha256sum's format, so `sha256sum -c` checks an unpacked copy by
// hand) and, when signed, checksums.txt.sig (cosign's blob signature over
// checksums.txt: since that file pins every other, the signature covers the whole
// package).
//
// The one idea: a package is read as a stream. [Open] walks a directory or reads a
// tar archive once, hashing every file as it passes and keeping in memory only
// the small files it must parse (expansion.yaml, checksums.txt, the signature and
// the image layout's index), so that checking a package of several gigabytes
// takes bounded memory. What a package may not hold is refused with the entry
// named: absolute names, "..", names that are not clean, duplicates, links,
// devices and other special files, and more than the [Limits] allow.
package expansion
