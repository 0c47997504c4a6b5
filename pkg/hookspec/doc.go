// Package hookspec is the node-hook manifest format: what the renderer writes to a
// machine (HooksManifestPath, scripts under HooksDir) and the node agent
// (pkg/nodeagent) runs, and what plugin loading checks a plugin's hooks against.
//
// It holds the wire types (Manifest, Hook, and the Cluster and Node facts a hook's
// condition sees), the phases and behaviours, the checks of single fields
// (CheckRef, CheckURL, CheckSHA256, CheckCondition) and of a whole manifest
// (ReadManifest), and the order hooks run in within a phase (Order, Schedule,
// CycleError). The agent's own behaviour — running processes, fetching scripts,
// reports and state — is documented in pkg/nodeagent.
//
// The package imports nothing that runs hooks or talks to a cluster or a cloud, so
// that reading a plugin.yaml or rendering a machine does not link the agent's
// process control or the AWS SDK.
//
// # Conditions
//
// A hook's `when` is a CEL expression (cel.dev/cel-go, compiled through pkg/expr and
// bounded by its cost limit) that must be a bool. It sees:
//
//	cluster.name               string
//	cluster.kubernetesVersion  string, like "1.37.2"
//	node.name                  string
//	node.pool                  string
//	node.role                  string, like "worker" or "control-plane"
//	node.labels                map(string, string)
//
// with CEL's standard library, the strings extension (ext.Strings), optional types,
// and for versions:
//
//	versionAtLeast(v, min)     bool: semantic v >= min; versionAtLeast('1.9', '1.30') is false
//	semver(s)                  a version, ordered by <, <=, >, >=, ==, != semantically
//	semver(s).major(), .minor() int
//
// Versions may be partial ("1.30" is 1.30.0) and have a leading "v". A string that is
// not a version makes evaluation fail, as does a missing label (use
// `'k' in node.labels`): a failure of the hook, not a silent skip.
// `cluster.kubernetesVersion >= '1.30'` still compiles, but compares strings;
// Condition.Warning points at versionAtLeast.
//
// # Ordering
//
// A hook's requires and before name other hooks of the phase, as "plugin/hook" or a
// bare name of the same plugin. A hook starts only after the hooks it requires and
// the hooks naming it in before have ended; otherwise the manifest's order holds (a
// stable topological sort). Hooks that wait for each other in a loop are a
// *CycleError whose message names the chain, a -> b -> a.
package hookspec
