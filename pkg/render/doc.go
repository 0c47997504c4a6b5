// Package render turns a finished model of a cluster into files that people review and
// keep in version control, and that providers and the deployer act on.
//
// Files renders into memory and Write replaces a directory with the result atomically
// (only a directory that is empty or holds MarkerFile from a previous render). The
// layout of a render:
//
//	control-plane/<component>.yaml    static Pods of kube-apiserver, kube-controller-manager, kube-scheduler
//	nodes/<pool>/cloud-init.yaml      per node pool, including the control-plane pseudo pool
//	nodes/<pool>/ignition.json        the same machine configuration as Ignition spec 3.4.0
//	cloud/template.json               the cloud template Input.Cloud builds (the aws provider's), patches applied
//	kubernetes/<NN>-<plugin>.yaml     each plugin's objects, then its Helm releases, in deploy order
//	plan.json                         Input.Plan as-is
//
// Every machine gets its plugins' files, units and drop-ins, its hook scripts under
// HooksDir and their list in HooksManifestPath for the node agent, and its kubelet
// flags (labels and taints included) in KubeletEnvPath, read by a kubelet.service
// drop-in. Both formats install the same units: kubeplug-boot.service runs
// `kubeplug node boot` (the beforeNodeup hooks, then the kubelet only if no enforced
// hook failed, with async hooks not holding it up, then afterNodeup; see
// nodeagent.Boot), and kubeplug-after-deploy.path runs the afterDeploy phase when the
// deploy writes hookspec.AfterDeployTriggerPath. The kubelet is not enabled, and its
// drop-in keeps it down while hookspec.FailedMarkerPath exists. cloud-init's runcmd
// only starts these units; Ignition enables them. Control-plane machines also get
// the static Pods in StaticPodDir.
//
// The one idea: output is a pure function of the input, byte for byte. Every map is
// walked in sorted order, lists keep the model's plugin order, and nothing depends on
// time, the host or the environment, so a re-render of an unchanged cluster is no diff.
//
// Problems are diagnostics, not errors: a render reports every problem it finds (a
// patch whose path does not exist, a chart that fails to render, two writers of the
// same machine path) and then returns no files if any of them is fatal.
package render
