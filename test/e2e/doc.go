// Package e2e drives the kubeplug command line end to end with testscript: each
// testdata/*.txtar is a shell-like script run against the real CLI, in a fresh
// directory, with $REPO pointing at this repository (its examples and contrib plugins).
package e2e
