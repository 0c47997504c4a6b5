// Package archtest holds kubeplug's architecture as data and the tests that keep
// the code true to it.
//
// Layers lists the layers from the bottom up; a package belongs to the layer of the
// longest import-path prefix that names it, so a new subpackage (pkg/deploy/ssa,
// pkg/runtime/declarative) falls into its parent's layer without an edit. A
// package may import packages of its own layer and of the layers below; importing
// a higher layer is an error, unless Exceptions lists that very import with the
// issue that removes it. A package that no prefix places is an error too: a new
// top-level package needs a line in the table, which is the point of the table.
//
// Loading is kept apart from running: LoadingPackages, the packages that read
// plugins, sources and cluster files, must not link anything that talks to a
// cluster or a cloud (NoCluster), and pkg/plugin nothing heavy at all. Every
// other package below the cluster layer is held to NoCluster too, except
// pkg/render: it links client-go through Helm's chart packages, and is held to
// importing no client itself and linking no AWS SDK (Render). The tests ask
// `go list -deps`, so an indirect import counts as much as a direct one.
//
// The rules only hold production code: tests may import whatever they exercise.
// `go test ./test/archtest` runs them; .golangci.yml's depguard rule repeats
// the strongest one for pkg/plugin, pkg/source and pkg/config, so that a lint run
// catches it too.
package archtest
