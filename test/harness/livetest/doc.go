// Package livetest runs a live display against a real terminal in tests: a
// pseudo-terminal whose output a small screen emulator applies (cursor moves,
// erasing, wrapping, scrolling), so that a test asserts what a person sees
// rather than which escape sequences were written.
package livetest
