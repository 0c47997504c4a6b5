// Package bounded reads user input without trusting it: every reader of a file a
// user names (a cluster file, a valuesFrom file, a plugin manifest, a hooks
// manifest) goes through ReadFile, which bounds the read by the bytes actually
// read rather than by the size the file claims, and bounds it in time.
//
// A file's stat size says nothing about devices, FIFOs or /proc files: /dev/zero
// claims 0 bytes and never ends, a FIFO claims 0 bytes and blocks in open(2) until
// a writer appears. ReadFile opens without blocking (O_NONBLOCK), reads at most
// limit+1 bytes, and gives a source that is not a regular file Deadline to deliver
// them, so `-f /dev/zero` is "larger than the limit" and `-f fifo` an error within
// seconds, never an out-of-memory or a hang. Process substitution
// (`-f <(sops -d cluster.yaml)`) keeps working: a pipe is read like any file.
//
// The distribution surfaces use the same helpers: lock files, keys and
// signatures go through ReadFile (ReadFileAs names the file in its error) with
// the limits declared here; archives that are streamed rather than read whole
// (plugin packages, expansions) are opened with OpenFile, which refuses FIFOs
// and devices outright; a password on standard input is read with ReadLine or
// Read, which stop at their limit.
package bounded
