// Package render turns a finished model of a cluster into files that people review and
// keep in version control, and that providers and the deployer act on.
//
// Files renders into memory and Write replaces a directory with the result atomically.
// The layout of a render:
//
//	control-plane/<component>.yaml    static Pods of kube-apiserver, -controller-manager, -scheduler
//	nodes/<pool>/cloud-init.yaml      per node pool (and the control-plane pseudo pool)
//	nodes/<pool>/ignition.json        the same machine configuration as Ignition v3.4.0
//	cloud/template.json               the CloudFormation-style cloud template, patches applied
//	kubernetes/<NN>-<plugin>.yaml     each plugin's objects and rendered Helm releases, in deploy order
//	plan.json                         the engine's plan
//
// The one idea: output is a pure function of the input, byte for byte. Every map is
// walked in sorted order, lists keep the model's plugin order, and nothing depends on
// time, the host or the environment, so a re-render of an unchanged cluster is no diff.
//
// Problems are diagnostics, not errors: a render reports every problem it finds (a
// patch whose path does not exist, a chart that fails to render, two plugins writing
// the same machine path) and then returns no files if any of them is fatal.
package render
