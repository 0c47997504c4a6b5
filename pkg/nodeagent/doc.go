// Package nodeagent runs the plugins' node hooks on a machine: the part of kubeplug
// that lives on the node, behind `kubeplug node run --phase <phase>`.
//
// The manifest format — Manifest, Hook, the phases, the condition facts, the order —
// is package hookspec's. The renderer (pkg/render) writes every hook of a machine to
// hookspec.HooksManifestPath and each script hook's script to
// hookspec.HooksDir/<plugin>/<hook>; the boot (Boot, behind `kubeplug node boot`)
// runs the agent for beforeNodeup, starts the kubelet (the nodeup step) once the
// phase's sync hooks ended without an enforced failure, runs it for afterNodeup, and
// the deploy triggers afterDeploy (hookspec.AfterDeployTriggerPath). One Run is one phase: the phase's hooks run in
// manifest order (see Ordering), and the Report of what ran is written to
// ReportsDir/<phase>.json. Options.Manifest reads another manifest instead.
//
// Every path is relative to Options.Root ("/" on a real machine), so a test or the
// local provider gives each simulated node a directory of its own.
//
// # Behaviours
//
//   - sync-enforce: the next hook waits for it; its failure fails the node, and no
//     further hook of the phase starts.
//   - sync-bypass: the next hook waits for it; its failure is only reported.
//   - async-enforce: it runs alongside the hooks after it; its failure fails the node
//     once it ends.
//   - async-bypass: it runs alongside the hooks after it; its failure is only reported.
//
// "Async" means "does not hold up the next hook", not "outlives the agent": Run waits
// for every async hook before it returns, so the report is complete, the node's
// failure is known when `kubeplug node run` exits, and no hook is left running
// unsupervised. A failed, timed-out or canceled hook is a failure; so is a condition
// that does not compile or evaluate. An enforced failure makes Run return a
// *HookError naming the hook, plugin, phase and node.
//
// A hook runs its command argv, or its script with the interpreter of its #! line
// (else /bin/sh), in its own process group, with the root as working directory and
// KUBEPLUG_ROOT, KUBEPLUG_PHASE, KUBEPLUG_PLUGIN, KUBEPLUG_HOOK and KUBEPLUG_NODE in
// its environment. On its timeout (default 5m) or when the context is canceled the
// whole group gets SIGTERM, then SIGKILL after Options.KillGrace, so children die too.
//
// # Ordering
//
// A hook's requires and before name other hooks of the phase, as "plugin/hook" or a
// bare name of the same plugin. A hook starts only after the hooks it requires and
// the hooks naming it in before have ended, async ones included; otherwise the
// manifest's order holds (hookspec.Schedule, a stable topological sort). A hook whose
// required hook failed, was skipped for its condition, did not run, or is not on the
// machine is not run; one that succeeded in an earlier run counts as succeeded. Hooks
// that wait for each other in a loop are a *hookspec.ManifestError wrapping a
// *hookspec.CycleError whose message names the chain, a -> b -> a; nothing runs.
//
// # Scripts from a URL
//
// A hook's url (https://host/path, or s3://bucket/key read with the AWS SDK, at
// Options.S3Endpoint for an S3-compatible store) is downloaded when the hook runs,
// within Options.FetchTimeout, and run only when its content has the hook's sha256;
// otherwise the hook fails and nothing of it runs. Verified scripts are kept in
// CacheDir by digest, so a re-run needs no network.
//
// # Boot secrets
//
// On a provider that delivers its part of the boot as an object the machine
// fetches with its own identity (the aws provider: S3, the instance role),
// FetchSecrets, behind `kubeplug node fetch-secrets`, runs before the boot
// (the rendered drop-in render.BootSecretsDropIn): it reads BootSecrets from
// an s3:// URL, waiting for an object not uploaded yet, and writes each file
// atomically with its mode. Every error names the URL.
//
// # Re-runs converge
//
// A hook that succeeded is recorded in StateDir/<phase>.json with a digest of its
// definition and script. A later run of the phase skips it, so a boot interrupted
// half-way resumes where it stopped; a changed hook, a failed one or Options.Force runs
// it again. A hook marked once runs again only while it has not succeeded: after a
// success, neither a changed definition nor Force runs it (deleting its entry from
// the state does). A lock file keeps two agents off one phase of one root.
//
// # Conditions
//
// A hook's `when` is a CEL expression over the cluster and node facts
// (hookspec.Cluster, hookspec.Node), compiled with hookspec.CompileCondition; the
// hookspec package documents what it sees. The facts are Options.Cluster and
// Options.Node, with the manifest's cluster and node as defaults. A condition that
// is false skips the hook; one that does not compile or evaluate (a missing label, a
// string that is not a version) fails it, and the report carries a warning for one
// that compares versions as strings.
package nodeagent
