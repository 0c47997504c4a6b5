// Package diag holds diagnostics: what kubeplug tells a user about their input and
// about a run, each pointing at the file, line, column and field it concerns.
//
// Every stage and every loader returns a List rather than stopping at the first
// problem, so a user sees all problems at once. A List with a fatal diagnostic stops
// the run; warnings (deprecations, shadowed plugins) are reported and the run goes on.
package diag
