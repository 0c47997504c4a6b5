// Package source finds plugin packages and indexes them by name and version.
//
// A Source is a tree that may hold many plugins and several versions of each: every
// directory with a plugin.yaml is a package (kubeplug does not look inside a package
// for more). Sources come in three origins, from the lowest precedence to the highest:
// the built-in plugins compiled into the binary, the contrib directory, and user
// directories. A plugin name present at a higher origin shadows every version of that
// name at lower origins, with a warning; the same name and version twice at one origin
// is an error naming both places.
package source
