// Package archive writes plugin packages as deterministic gzipped tar archives and
// unpacks them safely.
//
// [Write] produces the same bytes for the same tree: entries in lexical order, at the
// archive's root (no top-level directory), with fixed times, owners and modes (0755
// for directories and executable files, 0644 for other files), and a gzip header
// without name or time. Packaging a directory twice, or on another machine, gives the
// same file; its package digest ([plugin.Package.Digest]) is the directory's.
//
// [Extract] unpacks an archive into memory, never onto disk, and refuses what a
// package cannot hold or what would land outside it: entry names that are absolute,
// hold "..", or are not clean; duplicate entries; entries below a symlink; symlinks
// whose target is absolute or climbs above the package root; hard links, device
// files, FIFOs and other special files; and archives past the [Limits] (bytes per
// file, bytes in all, entries). Bytes are counted as they are decompressed, so a gzip
// bomb is refused after reading at most the limit, whatever its headers claim.
// [plugin.Load] then checks the unpacked tree again (chains of symlinks, sizes).
package archive
