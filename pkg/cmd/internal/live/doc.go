// Package live draws a live progress display on a terminal: one line per thing
// in progress (a plugin deploying, a control-plane component starting, an image
// being pushed, a wait for another run's lease), redrawn in place a few times a
// second with how long each has taken, and a permanent line printed above the
// display for each that finishes. Log lines written to the Display print above
// it too, so they never tear it.
//
// It draws with github.com/vbauerster/mpb (cursor up, erase down): use it only
// when the output is a terminal that understands ANSI escapes. Off a terminal
// a command prints plain lines instead; this package has nothing to do there.
package live
