// Package suggest finds the names a user probably meant when they typed one
// that does not exist, for "did you mean" hints in errors.
//
// Distance is the optimal string alignment distance (Levenshtein plus the
// transposition of two adjacent characters, so "lsit" is one edit from
// "list"), compared case-insensitively. A name is only suggested when it is
// close relative to its length: two edits in a five-letter name, or one in a
// two-letter name, are a guess, not a hint.
package suggest
