// Package expr is kubeplug's one home for CEL (cel.dev/cel-go): the environments
// plugin expressions are compiled in, the one cost limit every evaluation runs
// under, and compile and evaluate helpers whose errors carry positions.
//
// A plugin's expressions are compiled when the plugin is loaded or linted, so a
// broken one is refused pointing at the plugin.yaml field rather than failing its
// first deploy, and evaluated later by whoever runs them: deploy health expressions
// and expression checks over [Object], expression checks that name no object over
// [Objects], and node-hook conditions in an environment package hookspec builds
// with [NewEnv]. Sharing the package means sharing the rules: the strings extension
// and optional field selection (object.?status.?readyReplicas.orValue(0)) everywhere,
// a bool result everywhere, and [CostLimit] everywhere.
//
// The package imports nothing but CEL, so loading a plugin does not link the code
// that talks to a cluster.
package expr
