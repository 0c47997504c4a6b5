// Package exec runs a plugin's executable once per stage call: one JSON request
// on stdin, one JSON response on stdout (see package protocol and
// docs/plugin-protocol.md). It is the runtime for `spec.runtime.type: exec`, and
// works for any language, including a POSIX shell script.
//
// The one idea: every call runs the pinned bytes. At a Runtime's first call the
// executable is read once, its sha256 compared with spec.runtime.sha256, and
// exactly those bytes are written to a private file (mode 0500, in a directory
// of mode 0700 under the temporary directory), so a file swapped after the check
// is never executed. Every later call of the Runtime runs that same copy, without
// reading or hashing anything, so its cost does not grow with the executable: it
// first compares the copy's identity (device, inode, size, mode, modification and
// change time) with what was recorded when it was written, and when anything
// differs or the copy is gone, reads, verifies and copies the package's
// executable again. The bytes verified at the first call are what runs for the
// Runtime's life: a change to the package's file afterwards is not picked up (the
// digest pinned in plugin.yaml cannot change within one loaded package either); a
// new Runtime, as the next run builds, checks the file again. Close removes the
// copy.
//
// Each call gets a fresh private TMPDIR, removed with what the plugin left there
// when the call ends. The process runs in its own process group, with a minimal
// environment, stdout capped and a per-stage timeout; on timeout, cancellation or
// oversized output the whole group is killed. Whatever the plugin does — crash,
// hang, print garbage — Run returns an error carrying the tail of its stderr and
// the host carries on.
package exec
