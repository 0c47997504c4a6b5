// Package source lists plugin versions from the places plugins come from, and fetches
// the packages a resolution picked.
//
// A [Source] is a catalog: List returns every version it holds as metadata only — what
// the resolver needs (name, version, kubernetesVersion, requires, conflicts,
// after/before) plus the digest, origin and location — and Fetch loads one package
// whole, only once the resolver picked it. The built-in plugins ([Builtin]), the
// contrib directory and user directories ([Dir]) are sources; so are trees of any
// [fs.FS] ([FS]) and packages a program loaded itself ([Loaded]). A remote catalog is
// one more implementation. So are places that hold no plugin packages but Helm
// charts, each chart version made a package that installs it: a Helm repository
// ([HelmRepository]), the charts in an OCI registry ([HelmOCIRepository]), and a
// file of KKP ApplicationDefinitions ([KKPDefinitions]), whose versions name their
// charts by reference ([ChartFetcher] fetches those).
//
// An [Index] combines sources by precedence. Every source declares the
// [plugin.Origin] of what it lists: a name and a rank. A plugin name present at a
// higher rank shadows every version of that name at lower ranks, with a warning; the
// same name and version twice at one rank is an error naming both places. The Index
// is the [Catalog] the engine plans against: [Index.Fetch] routes a version to the
// source that listed it, loads it with every package check, and checks that what came
// is what the listing announced (name, version, every field the resolver read and,
// when announced, the digest), so a source cannot hand the engine anything but what
// the resolver chose.
//
// When problems are reported follows from this split: a broken plugin.yaml is found
// by listing, so every command that lists a source reports it; problems in the rest
// of a package (a missing file, a bad values schema, a symlink out of the package)
// are found by fetching, so `plan`, `render` and `apply` report them for the packages
// they use, and `plugin list` and `plugin lint`, which fetch everything, for all.
//
// A new kind of source (a remote catalog, say) implements [Source]: List from its
// index alone, announcing each package's digest so that Fetch is checked against it,
// with an [plugin.Origin] of its own whose rank places it among the others; Fetch
// downloads, unpacks (with the archive checks its contract names) and loads with
// [plugin.Load]. Nothing in package plugin or in the engine changes.
package source
