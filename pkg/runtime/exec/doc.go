// Package exec runs a plugin's executable once per stage call: one JSON request
// on stdin, one JSON response on stdout (see package protocol and
// docs/plugin-protocol.md). It is the runtime for `spec.runtime.type: exec`, and
// works for any language, including a POSIX shell script.
//
// The one idea: every call starts from the pinned bytes. Before each run the
// executable is read once, its sha256 compared with spec.runtime.sha256, and
// exactly those bytes are written to a private file that is then run, so a file
// swapped after the check is never executed. The process runs in its own process
// group, with a minimal environment, stdout capped and a per-stage timeout; on
// timeout, cancellation or oversized output the whole group is killed. Whatever the
// plugin does — crash, hang, print garbage — Run returns an error carrying the
// tail of its stderr and the host carries on.
package exec
