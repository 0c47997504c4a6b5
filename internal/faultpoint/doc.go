// Package faultpoint kills the process at named points, for crash tests.
//
// Code marks a point where a crash would be interesting with one line,
// faultpoint.Hit("apply:wave-start"). When the environment variable
// KUBEPLUG_FAULTPOINT is unset, as in every real run, Hit is a cheap no-op: the
// variable is read once. When it equals the point's name, the process sends
// itself SIGKILL there — a real kill -9 at a deterministic place, with no
// deferred function, no flush and no cleanup. "name:N" kills at the N-th hit
// of that point (counting from 1), so a point inside a loop can be hit in the
// middle of it.
//
// The kill -9 matrix in test/e2e/faults runs the kubeplug CLI once per point
// and checks that a re-run converges.
package faultpoint
