// Package resolve decides which version of every plugin a cluster gets and in
// which order the plugins are installed.
//
// Use it once per run, after the plugin sources are loaded and before any
// stage runs: hand [Resolve] a [Catalog] of every version the sources hold and a
// [Request] naming what the cluster enables. It returns one version of each
// enabled plugin and of everything those require, transitively, grouped into
// waves that can be installed in parallel.
//
// The one idea a reader needs: resolution is two separate steps. First a
// search picks versions — the highest version of each name that satisfies
// every constraint placed on that name (by the cluster and by every selected
// package that requires it) and the cluster's Kubernetes version, or the
// version [Request.Prefer] names when that one satisfies them (a lock's pin),
// backtracking when a choice leads to an unsatisfiable constraint or a
// conflict. Then the
// chosen set, and only it, is ordered: hard edges from requires, soft edges
// from after/before hints whose other end was selected, and the cluster's
// optional order list. Ordering never changes which versions are picked.
//
// The package knows nothing about plugin.yaml or cluster.yaml: callers convert
// their own types into [Package] and [Request] and carry whatever they need in
// [Package.Source]. Output is deterministic: the same catalog and request give
// the same result, whatever order the caller listed them in. Errors name the
// plugins, versions and constraints involved; their texts are part of the
// contract and covered by tests.
package resolve
