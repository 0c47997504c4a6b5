// Package importer translates what users of other cluster tools already have —
// Helm charts, KKP ApplicationDefinitions, kube-aws plugins, kops cluster specs and
// TKEStack expansions — into kubeplug plugin packages.
//
// Each importer is one file with one function, From<Source>, that reads its input
// and returns a [Result]: the packages to write, each with its plugin.yaml as a typed
// manifest, the files it carries, and a [Report] of what was mapped where, what was
// renamed or re-versioned (with the rule and the original) and every source field it
// could not map. The one idea: nothing is dropped silently. A field an importer does
// not understand is listed as unmapped by its path in the source, and the source file
// itself is kept beside the plugin (under original/) for review.
//
// Importers do not write or check anything: pkg/action's Import writes the result
// into a fresh directory, loads every package with the checks `plugin lint` runs,
// and only then moves it into place, so a failed import leaves nothing behind.
package importer
