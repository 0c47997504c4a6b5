// Package plugin reads and checks plugin packages.
//
// A package is a directory (on disk or compiled into the binary) holding plugin.yaml
// and the files it refers to: a values schema, manifests, charts, scripts and
// executables. Load checks all of it at once — the manifest against its generated
// schema, versions and constraints, every file reference, the package's own files
// (no symlink may point outside it, no file may be too large) — and returns every
// problem as a diagnostic naming FILE:LINE:COL and the field. A package that loads
// without fatal diagnostics is safe to hand to the engine.
//
// A package's Digest is a sha256 over a canonical walk of its files (sorted paths,
// contents, symlink targets; not timestamps or permissions), so the same files give the
// same digest whether they come from a directory, an archive or the binary.
package plugin
