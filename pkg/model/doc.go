// Package model holds the typed constructs plugins contribute to: control-plane
// component flags, feature gates and volumes; per node pool files, systemd units,
// kubelet settings and node hooks; cloud template resources, outputs, IAM statements
// and patches; Kubernetes objects, Helm releases and manifest patches.
//
// Every construct records the plugin that set it (By). Add merges one plugin's
// Contribution into the Model: two plugins setting the same key to different values
// is a fatal diagnostic naming both plugins and the key; setting it to the same value
// is allowed; list-valued constructs (taints, hooks, IAM statements, patches, objects)
// append in plugin order. The renderers turn a finished Model into files, and the
// engine hands the model so far to every plugin at every stage.
package model
