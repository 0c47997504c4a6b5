// Package fuzzseed holds the hostile inputs every parser's fuzz target starts
// from: the classes of input that broke kubeplug once (alias bombs, huge and
// out-of-range numbers, syntax errors, tabs, deep nesting, control characters,
// duplicate keys, multiple documents). Fuzz targets add them with Add, next to
// the repository's own good and bad examples, so every fuzzing run begins at the
// edges an attacker would try first.
package fuzzseed
