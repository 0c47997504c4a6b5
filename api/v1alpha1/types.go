package v1alpha1

// GroupVersion is the apiVersion of every kubeplug file.
const GroupVersion = "kubeplug.dev/v1alpha1"

// Kinds of kubeplug files.
const (
	KindPlugin  = "Plugin"
	KindCluster = "Cluster"
)

// Values is a free-form tree of plugin values (YAML/JSON objects, lists and scalars).
type Values = map[string]any

// Plugin is the manifest of a plugin package: plugin.yaml at the package root.
type Plugin struct {
	// APIVersion must be kubeplug.dev/v1alpha1.
	APIVersion string `json:"apiVersion" jsonschema:"enum=kubeplug.dev/v1alpha1"`
	// Kind must be Plugin.
	Kind string `json:"kind" jsonschema:"enum=Plugin"`
	// Metadata names and versions the plugin.
	Metadata PluginMetadata `json:"metadata"`
	// Spec says what the plugin needs and what it contributes.
	Spec PluginSpec `json:"spec"`
}

// PluginMetadata identifies one version of a plugin.
type PluginMetadata struct {
	// Name is a DNS label (lower-case letters, digits and '-', at most 63 characters).
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=63"`
	// Version is a semantic version, for example 1.4.0.
	Version string `json:"version" jsonschema:"pattern=^(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\\+[0-9A-Za-z.-]+)?$"`
	// Description says in one line what the plugin does.
	Description string `json:"description,omitempty"`
}

// PluginSpec is what a plugin requires and contributes.
type PluginSpec struct {
	// KubernetesVersion is a semver constraint on the cluster's Kubernetes version, for example ">=1.33".
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// Providers lists the providers the plugin runs on (an AWS-only plugin:
	// [aws]); empty means every provider. The resolver refuses the plugin in a
	// cluster of another provider, and plugin lint renders it for the first one.
	Providers []string `json:"providers,omitempty" jsonschema:"uniqueItems=true,enum=local,enum=aws"`
	// Requires lists plugins that must be installed, and ordered, before this one.
	Requires []Dependency `json:"requires,omitempty"`
	// After lists plugins this one runs after when they are enabled too (a soft hint).
	After []string `json:"after,omitempty"`
	// Before lists plugins this one runs before when they are enabled too (a soft hint).
	Before []string `json:"before,omitempty"`
	// Conflicts lists plugins that must not be enabled together with this one.
	Conflicts []string `json:"conflicts,omitempty"`
	// Values declares the plugin's values: schema, defaults and sensitive paths.
	Values *ValuesSpec `json:"values,omitempty"`
	// Contributes is what the plugin adds to the cluster at every layer.
	Contributes *Contributions `json:"contributes,omitempty"`
	// Runtime runs an executable from the package for each stage (optional).
	Runtime *Runtime `json:"runtime,omitempty"`
	// Validate lists checks that prove the plugin works once deployed.
	Validate []Check `json:"validate,omitempty"`
	// Health adds readiness conditions per kind: an object of a kind named here is
	// ready only when kstatus says Current and the expression is true.
	Health []HealthCheck `json:"health,omitempty"`
	// Upgrade says how the plugin moves between its versions once installed.
	Upgrade *UpgradePolicy `json:"upgrade,omitempty"`
	// Drift lists changes to the plugin's live objects that are expected (an
	// autoscaler setting replicas) and so are not drift.
	Drift *DriftPolicy `json:"drift,omitempty"`
}

// UpgradePolicy says how a plugin moves between its versions.
type UpgradePolicy struct {
	// AllowDowngrade declares that what this version leaves in the cluster can be
	// read by older versions, so moving from this version to an older one needs no
	// --allow-downgrade. It is recorded when the version is installed.
	AllowDowngrade bool `json:"allowDowngrade,omitempty"`
}

// DriftPolicy lists fields that are not drift.
type DriftPolicy struct {
	// Ignore lists fields of the plugin's objects that others may change.
	Ignore []DriftIgnore `json:"ignore,omitempty"`
}

// DriftIgnore names fields, by JSON pointer, of the plugin's objects of one kind
// (and optionally one name and namespace) that drift detection ignores.
type DriftIgnore struct {
	ObjectRef
	// Paths are JSON pointers into the object, for example /spec/replicas.
	Paths []string `json:"paths" jsonschema:"minItems=1"`
}

// HealthCheck is a readiness condition for the plugin's objects of one kind.
type HealthCheck struct {
	// APIVersion restricts the check to one API version, for example "apps/v1";
	// empty matches every version of the kind.
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind of the objects the check applies to, for example "Certificate".
	Kind string `json:"kind" jsonschema:"minLength=1"`
	// Expression is a CEL expression over `object`, the live object as a map, that
	// must be true, for example `object.status.phase == "Ready"`.
	Expression string `json:"expression" jsonschema:"minLength=1"`
}

// Dependency names a required plugin and an optional version constraint.
type Dependency struct {
	// Name of the required plugin.
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=63"`
	// Version is a semver constraint, for example ">=1.14" or "^2". Empty means any.
	Version string `json:"version,omitempty"`
}

// ValuesSpec declares a plugin's values.
type ValuesSpec struct {
	// Schema is the path, inside the package, of a JSON Schema (draft 2020-12) for the values.
	Schema string `json:"schema,omitempty"`
	// Defaults are the values used when the cluster sets none.
	Defaults Values `json:"defaults,omitempty"`
	// Sensitive lists JSON pointers (for example /clientSecret) to values that are
	// redacted wherever kubeplug prints or writes values.
	Sensitive []string `json:"sensitive,omitempty"`
}

// Contributions are the constructs a plugin adds, grouped by layer.
type Contributions struct {
	// ControlPlane adds flags, feature gates and volumes to control-plane components.
	ControlPlane *ControlPlane `json:"controlPlane,omitempty"`
	// Nodes adds files, systemd units, kubelet settings and hooks to machines.
	Nodes []NodeContribution `json:"nodes,omitempty"`
	// Cloud adds resources, outputs, IAM statements and patches to the cloud template.
	Cloud *Cloud `json:"cloud,omitempty"`
	// Kubernetes adds manifests, Helm releases and patches to the running cluster.
	Kubernetes *Kubernetes `json:"kubernetes,omitempty"`
	// KeyPairs are certificates and keys the plugin's machine-side parts need
	// (kube-aws's pki.keypairs), issued by kubeplug and delivered to machines.
	KeyPairs []KeyPair `json:"keyPairs,omitempty"`
}

// KeyPair is a certificate and its key that kubeplug issues for a plugin, keeps
// in its state beside the cluster's PKI, issues again when it nears expiry or
// when its declaration changes, and delivers to the machines as it delivers the
// cluster's PKI — never in user data or rendered output. Templates see only
// paths: .KeyPairs.NAME.CertFile, .KeyFile and .CAFile.
type KeyPair struct {
	// Name is a DNS label, unique in the plugin; the files are
	// /etc/kubeplug/plugins/PLUGIN/pki/NAME.crt, NAME.key and NAME-ca.crt.
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=63"`
	// CA signs the certificate: cluster (the cluster's CA, the default) or
	// plugin (a CA of the plugin's own, issued and kept beside the pair).
	CA string `json:"ca,omitempty" jsonschema:"enum=cluster,enum=plugin"`
	// CommonName is the certificate's subject CN (a template).
	CommonName string `json:"commonName" jsonschema:"minLength=1"`
	// Organizations are the subject's O (Kubernetes groups for a client certificate).
	Organizations []string `json:"organizations,omitempty"`
	// DNSNames and IPAddresses are the subject alternative names.
	DNSNames    []string `json:"dnsNames,omitempty"`
	IPAddresses []string `json:"ipAddresses,omitempty"`
	// Usages: server (TLS server authentication), client (TLS client
	// authentication), or both.
	Usages []string `json:"usages" jsonschema:"minItems=1,uniqueItems=true,enum=server,enum=client"`
	// Validity is the certificate's lifetime, a Go duration. Default 8760h
	// (a year); it is issued again past two thirds of it.
	Validity string `json:"validity,omitempty"`
	// Pools limits the machines that get the pair to these node pools; empty
	// means every pool.
	Pools []string `json:"pools,omitempty"`
	// Roles limits the machines that get the pair to these roles
	// (control-plane, worker); empty means every role.
	Roles []string `json:"roles,omitempty" jsonschema:"uniqueItems=true"`
}

// ControlPlane contributions.
type ControlPlane struct {
	// Etcd configures etcd, the control plane's store.
	Etcd *Component `json:"etcd,omitempty"`
	// APIServer configures kube-apiserver.
	APIServer *Component `json:"apiServer,omitempty"`
	// ControllerManager configures kube-controller-manager.
	ControllerManager *Component `json:"controllerManager,omitempty"`
	// Scheduler configures kube-scheduler.
	Scheduler *Component `json:"scheduler,omitempty"`
	// FeatureGates are set on every Kubernetes control-plane component (not etcd, whose gates differ).
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
}

// Component is one control-plane component's flags and volumes.
type Component struct {
	// Flags without the leading dashes, for example oidc-issuer-url.
	Flags map[string]string `json:"flags,omitempty"`
	// Volumes mounted from the control-plane host into the component.
	Volumes []HostPathVolume `json:"volumes,omitempty"`
}

// HostPathVolume mounts a host path into a control-plane component.
type HostPathVolume struct {
	// Name of the volume, a DNS label.
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=63"`
	// HostPath is the absolute path on the host.
	HostPath string `json:"hostPath" jsonschema:"minLength=1"`
	// MountPath is the absolute path inside the component.
	MountPath string `json:"mountPath" jsonschema:"minLength=1"`
	// ReadOnly mounts the volume read-only.
	ReadOnly bool `json:"readOnly,omitempty"`
}

// NodeContribution adds to the machines of some node pools and roles.
type NodeContribution struct {
	// Pools limits the contribution to these node pools; empty means every pool.
	Pools []string `json:"pools,omitempty"`
	// Roles limits the contribution to these roles (control-plane, worker); empty means every role.
	Roles []string `json:"roles,omitempty" jsonschema:"uniqueItems=true"`
	// Files written on the machine.
	Files []NodeFile `json:"files,omitempty"`
	// SystemdUnits installed on the machine.
	SystemdUnits []SystemdUnit `json:"systemdUnits,omitempty"`
	// Kubelet settings.
	Kubelet *Kubelet `json:"kubelet,omitempty"`
	// Hooks run by the node agent at entry points of the machine's boot.
	Hooks []NodeHook `json:"hooks,omitempty"`
}

// NodeFile is a file written on a machine. At most one of Content, Source and URL is set.
type NodeFile struct {
	// Path is the absolute path on the machine.
	Path string `json:"path" jsonschema:"minLength=1"`
	// Content is the file's text (a template).
	Content string `json:"content,omitempty"`
	// Source is a file inside the package whose bytes are copied, or, with
	// Template true, rendered as a template like Content.
	Source string `json:"source,omitempty"`
	// Template says whether Source is a template. true renders it; false copies
	// it byte for byte (a script that holds "{{" of its own). Unset copies it, and
	// plugin lint reports a source that holds "{{" until the plugin says which.
	Template *bool `json:"template,omitempty"`
	// URL is where the file's bytes are downloaded from (https://, or http://),
	// at render, into kubeplug's cache, checked against SHA256: a binary past
	// the package size limit (kube-aws's type: binary). It needs SHA256.
	URL string `json:"url,omitempty"`
	// SHA256 is the hex SHA-256 of what URL serves; a download that differs is
	// refused.
	SHA256 string `json:"sha256,omitempty" jsonschema:"pattern=^[0-9a-f]{64}$"`
	// Mode is the octal permission, for example "0644".
	Mode string `json:"mode,omitempty" jsonschema:"pattern=^0?[0-7]{3}$"`
	// Owner is user:group, for example root:root.
	Owner string `json:"owner,omitempty"`
}

// SystemdUnit is a unit file and its drop-ins.
type SystemdUnit struct {
	// Name of the unit, for example node-exporter.service.
	Name string `json:"name" jsonschema:"minLength=1"`
	// Content is the unit file (a template); empty when only drop-ins are added to an existing unit.
	Content string `json:"content,omitempty"`
	// Enable starts the unit at boot.
	Enable bool `json:"enable,omitempty"`
	// Mask keeps a unit the machine's OS has from ever starting: it is stopped
	// and masked (systemctl mask --now: linked to /dev/null), as Ignition's and
	// kube-aws's mask: true. A masked unit has no content, enable or drop-ins.
	Mask bool `json:"mask,omitempty"`
	// DropIns are added as <name>.d/<dropIn.name>.
	DropIns []DropIn `json:"dropIns,omitempty"`
}

// DropIn is a systemd drop-in file.
type DropIn struct {
	// Name of the drop-in file, for example 10-proxy.conf.
	Name string `json:"name" jsonschema:"minLength=1"`
	// Content of the drop-in (a template).
	Content string `json:"content"`
}

// Kubelet settings contributed to nodes.
type Kubelet struct {
	// Flags without the leading dashes.
	Flags map[string]string `json:"flags,omitempty"`
	// Labels put on the Node.
	Labels map[string]string `json:"labels,omitempty"`
	// Taints put on the Node.
	Taints []Taint `json:"taints,omitempty"`
	// FeatureGates for the kubelet.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
}

// Taint on a Node.
type Taint struct {
	Key    string `json:"key" jsonschema:"minLength=1"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect" jsonschema:"enum=NoSchedule,enum=PreferNoSchedule,enum=NoExecute"`
}

// Hook entry points on a machine.
const (
	HookBeforeNodeup = "beforeNodeup"
	HookAfterNodeup  = "afterNodeup"
	HookAfterDeploy  = "afterDeploy"
)

// Hook behaviours: sync hooks block the boot, async ones do not; enforce hooks fail
// the node when they fail, bypass ones are reported only.
const (
	BehaviorSyncEnforce  = "sync-enforce"
	BehaviorSyncBypass   = "sync-bypass"
	BehaviorAsyncEnforce = "async-enforce"
	BehaviorAsyncBypass  = "async-bypass"
)

// NodeHook is something the node agent runs at an entry point of a machine's boot.
type NodeHook struct {
	// Name of the hook, unique within the plugin.
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=63"`
	// At is the entry point.
	At string `json:"at" jsonschema:"enum=beforeNodeup,enum=afterNodeup,enum=afterDeploy"`
	// Run is what the hook executes.
	Run HookRun `json:"run"`
	// Behavior says whether the boot waits for the hook and whether its failure fails the node. Default sync-enforce.
	Behavior string `json:"behavior,omitempty" jsonschema:"enum=sync-enforce,enum=sync-bypass,enum=async-enforce,enum=async-bypass"`
	// Timeout is a Go duration, for example 2m. Default 5m.
	Timeout string `json:"timeout,omitempty"`
	// When is a CEL condition; the hook runs only when it is true.
	When string `json:"when,omitempty"`
	// Before names hooks of the same phase that start only after this one ends:
	// "plugin/hook", or a bare name for a hook of this plugin. Ordering only.
	Before []string `json:"before,omitempty"`
	// Requires names hooks of the same phase that must succeed before this one runs;
	// when one fails or is skipped, this hook is not run.
	Requires []string `json:"requires,omitempty"`
	// Once makes a hook that succeeded on a machine never run again there, even when
	// its definition changes: for one-time steps like formatting a disk.
	Once bool `json:"once,omitempty"`
}

// HookRun is a hook's command, script or URL. Exactly one is set.
type HookRun struct {
	// Command is an argv run on the machine.
	Command []string `json:"command,omitempty"`
	// Script is a path inside the package, copied to the machine and run.
	Script string `json:"script,omitempty"`
	// URL is a script the node agent downloads when the hook runs: https://host/path
	// or s3://bucket/key. It requires SHA256.
	URL string `json:"url,omitempty"`
	// SHA256 is the hex digest the downloaded script must have; a mismatch refuses to run it.
	SHA256 string `json:"sha256,omitempty"`
}

// Cloud template contributions.
type Cloud struct {
	// Resources added to the template, by logical name.
	Resources map[string]any `json:"resources,omitempty"`
	// Outputs added to the template, by name.
	Outputs map[string]any `json:"outputs,omitempty"`
	// IAM statements added to a role's policy.
	IAM []IAMStatements `json:"iam,omitempty"`
	// Patches (RFC 6902) applied to the generated template.
	Patches []PatchOp `json:"patches,omitempty"`
	// Stacks are CloudFormation stacks of the plugin's own, deployed by the aws
	// provider after the core stack (cloud/template.json) and the stacks they take
	// outputs from. See docs/aws.md.
	Stacks []CloudStack `json:"stacks,omitempty"`
	// Pools are parts of the node pools' cloud resources, each placed in every
	// pool it selects (by pool name or role), so that one plugin works for pools
	// of any name. See docs/plugin-format.md, "Per-pool cloud parts".
	Pools []CloudPool `json:"pools,omitempty"`
}

// CloudPool is one plugin's part of the cloud resources of the pools it
// selects. Its named entries are set in each selected pool's cloud document
// ({iam, tags, securityGroupIngress, launchTemplate}); setting a name another
// plugin set is a conflict, so to change one a plugin patches it by name with
// Patches, whose paths are relative to that document
// (/launchTemplate/MetadataOptions/HttpPutResponseHopLimit, /iam/NAME/Action/-).
type CloudPool struct {
	// Pool selects the pools whose name matches this pattern (Go's path.Match:
	// "gpu-*"); empty selects by Role alone.
	Pool string `json:"pool,omitempty"`
	// Role selects the pools of this role: worker or control-plane; empty, any role.
	Role string `json:"role,omitempty" jsonschema:"enum=,enum=worker,enum=control-plane"`
	// IAM are statements of the pools' IAM role by name.
	IAM map[string]map[string]any `json:"iam,omitempty"`
	// Tags are tags of the pools' Auto Scaling groups, propagated to their machines.
	Tags map[string]string `json:"tags,omitempty"`
	// SecurityGroupIngress are ingress rules (AWS::EC2::SecurityGroup's
	// SecurityGroupIngress entries) of a security group of the pool's own, by name.
	SecurityGroupIngress map[string]map[string]any `json:"securityGroupIngress,omitempty"`
	// LaunchTemplate are properties of the pools' LaunchTemplateData by name
	// (InstanceType, MetadataOptions, BlockDeviceMappings, ...); UserData,
	// ImageId, IamInstanceProfile and SecurityGroupIds are kubeplug's.
	LaunchTemplate map[string]any `json:"launchTemplate,omitempty"`
	// Patches (RFC 6902) change what is set, by name, in each selected pool's
	// cloud document after every plugin set its parts.
	Patches []PatchOp `json:"patches,omitempty"`
}

// CloudStack is one extra CloudFormation stack a plugin contributes. render writes
// its template to cloud/stacks/<name>.json and lists it in cloud/stacks.json.
type CloudStack struct {
	// Name of the stack, unique in the cluster; "core" is the cluster's own. The
	// CloudFormation stack is <stackPrefix>-<name>.
	Name string `json:"name" jsonschema:"pattern=^[a-z][-a-z0-9]*[a-z0-9]$,maxLength=60"`
	// Template is the stack's CloudFormation template, as an object.
	Template map[string]any `json:"template"`
	// Parameters are values of the template's parameters.
	Parameters map[string]string `json:"parameters,omitempty"`
	// Inputs set parameters of the template to outputs of other stacks, as
	// STACK.OUTPUT: core.VpcId is the core stack's VpcId output. The stacks named
	// deploy first.
	Inputs map[string]string `json:"inputs,omitempty"`
	// DependsOn are other stacks that deploy before this one and are deleted after it.
	DependsOn []string `json:"dependsOn,omitempty"`
}

// IAMStatements adds policy statements to the role of the control plane or of a node pool.
type IAMStatements struct {
	// Role is control-plane, worker or a node pool's name.
	Role string `json:"role" jsonschema:"minLength=1"`
	// Statements are IAM policy statements.
	Statements []map[string]any `json:"statements" jsonschema:"minItems=1"`
}

// PatchOp is one RFC 6902 JSON patch operation.
type PatchOp struct {
	Op    string `json:"op" jsonschema:"enum=add,enum=remove,enum=replace,enum=move,enum=copy,enum=test"`
	Path  string `json:"path"`
	From  string `json:"from,omitempty"`
	Value any    `json:"value,omitempty"`
}

// Kubernetes contributions to the running cluster.
type Kubernetes struct {
	// Manifests are paths inside the package: YAML files or directories of them.
	Manifests []string `json:"manifests,omitempty"`
	// HelmReleases are charts, inside the package, installed through the Helm SDK.
	HelmReleases []HelmRelease `json:"helmReleases,omitempty"`
	// Patches to manifests that other plugins or the core generated.
	Patches []ManifestPatch `json:"patches,omitempty"`
	// APIs are API groups the plugin serves through the Kubernetes API (aggregation):
	// kubeplug generates their APIService objects, serving certificates and the RBAC
	// of delegated authentication. See docs/served-apis.md.
	APIs []ServedAPI `json:"apis,omitempty"`
	// Webhooks are admission webhooks served by the plugin: kubeplug generates their
	// configurations with the CA injected and safe defaults.
	Webhooks []Webhook `json:"webhooks,omitempty"`
}

// HelmRelease is a chart installed as a Helm release.
type HelmRelease struct {
	// Name of the release; defaults to the plugin's name.
	Name string `json:"name,omitempty" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=53"`
	// Chart is a chart inside the package: a directory, or a packaged chart (.tgz) as
	// `helm pull` and chart repositories give. Or a chart by reference, fetched
	// into the cache and pinned in kubeplug.lock: oci://REGISTRY/REPO/CHART with
	// Version, or, with Repo, the chart's name in that Helm repository.
	Chart string `json:"chart" jsonschema:"minLength=1"`
	// Repo is the URL of the Helm chart repository (its index.yaml is under it)
	// holding Chart: https://, or plain http:// to a loopback address.
	Repo string `json:"repo,omitempty"`
	// Version of a chart by reference: a version or a constraint ("6.x",
	// ">=1.2 <2"); the highest matching version is taken, or the one
	// kubeplug.lock pins when the constraint admits it.
	Version string `json:"version,omitempty"`
	// Namespace the release is installed into.
	Namespace string `json:"namespace" jsonschema:"minLength=1"`
	// Test runs the chart's test hooks (helm.sh/hook: test) as `helm test` does,
	// in the plugin's validate stage after its checks (apply, up and `plugin test
	// --cluster`): a failed test fails the validation. Render and install leave
	// test hooks out either way.
	Test bool `json:"test,omitempty"`
	// ValuesFiles are YAML files inside the package, merged in order as `helm -f a -f b`
	// merges them, before Values. They are plain YAML, not templates.
	ValuesFiles []string `json:"valuesFiles,omitempty"`
	// Values passed to the chart, merged over ValuesFiles as `--set` is. They keep
	// their YAML types; string leaves are templates (which render to strings), and a
	// mapping {fromValue: /json/pointer} is replaced by the plugin's value at that
	// pointer with its type (a list, a map, a number), or left out when it is unset.
	Values Values `json:"values,omitempty"`
}

// ManifestPatch patches the objects that match Target.
type ManifestPatch struct {
	// Target selects objects by kind, and optionally name and namespace.
	Target ObjectRef `json:"target"`
	// Patch is an RFC 6902 JSON patch.
	Patch []PatchOp `json:"patch" jsonschema:"minItems=1"`
}

// ObjectRef names a Kubernetes object.
type ObjectRef struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind" jsonschema:"minLength=1"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
}

// Runtime types.
const (
	RuntimeExec = "exec"
	RuntimeGRPC = "grpc"
)

// Runtime runs an executable from the package for each stage.
type Runtime struct {
	// Type is exec (JSON on stdin/stdout) or grpc (hashicorp/go-plugin).
	Type string `json:"type" jsonschema:"enum=exec,enum=grpc"`
	// Command is the argv; its first element is a path inside the package.
	Command []string `json:"command" jsonschema:"minItems=1"`
	// SHA256 is the hex digest of the executable; it runs only when it matches.
	SHA256 string `json:"sha256" jsonschema:"pattern=^[0-9a-f]{64}$"`
	// Timeout per stage call, a Go duration. Default 1m.
	Timeout string `json:"timeout,omitempty"`
	// RBAC is what the plugin's code may do in the cluster at the deploy and
	// validate stages: kubeplug makes the ServiceAccount kubeplug-system/
	// kubeplug-plugin-<name>, a ClusterRole of these rules bound to it, and
	// hands the code a kubeconfig with a short-lived token of that account.
	// Empty: the account may do nothing but authenticate.
	RBAC []PolicyRule `json:"rbac,omitempty"`
}

// PolicyRule is one rule of a ClusterRole (rbac.authorization.k8s.io/v1).
type PolicyRule struct {
	// APIGroups of the resources; "" is the core group.
	APIGroups []string `json:"apiGroups,omitempty"`
	// Resources, such as configmaps or deployments/scale.
	Resources []string `json:"resources" jsonschema:"minItems=1"`
	// Verbs, such as get, list, create.
	Verbs []string `json:"verbs" jsonschema:"minItems=1"`
	// ResourceNames limits the rule to objects of these names.
	ResourceNames []string `json:"resourceNames,omitempty"`
}

// Check proves a deployed plugin works.
//
// A check runs after the deploy stage; exactly one of Wait, Expression and Exec is
// set. Checks are retried until they pass or their timeout ends.
type Check struct {
	// Name of the check, for reports.
	Name string `json:"name,omitempty"`
	// Wait waits until an object exists and is ready (kstatus Current).
	Wait *ObjectWait `json:"wait,omitempty"`
	// Expression waits until a CEL expression over live objects is true.
	Expression *ExpressionCheck `json:"expression,omitempty"`
	// Exec runs an executable from the package against the cluster; exit status 0 passes.
	Exec *ExecCheck `json:"exec,omitempty"`
}

// ExpressionCheck is a CEL expression over the objects its reference selects: with
// a name, `object` is that object; without one, `objects` is the list of every
// object of the kind (in the namespace, when one is given).
type ExpressionCheck struct {
	ObjectRef
	// Expression must evaluate to true, for example
	// `object.status.readyReplicas >= 1` or `objects.size() > 0`.
	Expression string `json:"expression" jsonschema:"minLength=1"`
	// Message is reported when the check fails; default: the expression.
	Message string `json:"message,omitempty"`
	// Timeout is a Go duration. Default 2m.
	Timeout string `json:"timeout,omitempty"`
}

// ExecCheck runs a command whose first element is an executable inside the package,
// with KUBECONFIG naming the cluster. Its output is reported when it fails.
type ExecCheck struct {
	// Command is the executable's path inside the package and its arguments.
	Command []string `json:"command" jsonschema:"minItems=1"`
	// SHA256 pins the executable: the hex digest its bytes must have, checked on
	// the bytes that run. Optional (the package digest covers the file at load);
	// a spec.runtime executable is pinned by the runtime's sha256.
	SHA256 string `json:"sha256,omitempty" jsonschema:"pattern=^[0-9a-f]{64}$"`
	// Timeout is a Go duration. Default 2m.
	Timeout string `json:"timeout,omitempty"`
}

// ObjectWait waits for one object to become ready: kstatus Current, or, with
// Condition, until that condition is True.
type ObjectWait struct {
	ObjectRef
	// Condition, when set, is the type of a status condition that must be True
	// (for example Ready, set by an operator), with observedGeneration (when the
	// condition or the status has one) equal to the object's generation.
	Condition string `json:"condition,omitempty" jsonschema:"pattern=^[A-Za-z][A-Za-z0-9_.-]*$,maxLength=316"`
	// Timeout is a Go duration. Default 5m.
	Timeout string `json:"timeout,omitempty"`
}

// Cluster is cluster.yaml: the cluster and the plugins it enables.
type Cluster struct {
	// APIVersion must be kubeplug.dev/v1alpha1.
	APIVersion string `json:"apiVersion" jsonschema:"enum=kubeplug.dev/v1alpha1"`
	// Kind must be Cluster.
	Kind string `json:"kind" jsonschema:"enum=Cluster"`
	// Metadata names the cluster.
	Metadata ClusterMetadata `json:"metadata"`
	// Spec describes the cluster.
	Spec ClusterSpec `json:"spec"`
}

// ClusterMetadata names a cluster.
type ClusterMetadata struct {
	// Name is a DNS label.
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=63"`
}

// ClusterSpec describes a cluster.
type ClusterSpec struct {
	// KubernetesVersion is the cluster's version, for example 1.36.3.
	KubernetesVersion string `json:"kubernetesVersion" jsonschema:"minLength=1"`
	// Provider brings the machines and the control plane. Default: local.
	Provider *Provider `json:"provider,omitempty"`
	// ControlPlane sizes the control plane.
	ControlPlane *ControlPlaneSpec `json:"controlPlane,omitempty"`
	// NodePools are groups of identical worker machines.
	NodePools []NodePool `json:"nodePools,omitempty"`
	// Plugins says where plugins come from and which are enabled.
	Plugins *ClusterPlugins `json:"plugins,omitempty"`
	// Expansions is the site's policy for the expansions a run merges
	// (--expansion-dir; see docs/expansions.md).
	Expansions *ClusterExpansions `json:"expansions,omitempty"`
}

// ClusterExpansions is the site's policy for the expansions a run merges.
type ClusterExpansions struct {
	// Allow, when set, says what an expansion may skip or delegate: a skip
	// step, skipped check or delegated check it does not list is refused when
	// the expansion is verified for the run, naming the expansion and the
	// step. Unset, every skip and delegation is allowed (each still reported).
	Allow *ExpansionAllow `json:"allow,omitempty"`
	// AllowFile is the path (relative to the cluster file) of the site's
	// allowlist in a file of its own, signed by the site: the fields of
	// Allow, with the detached signature FILE.sig (`kubeplug expansion
	// sign-allowlist`), which must verify with a key the run trusts
	// (--expansion-key). An unsigned or changed one is refused, naming its
	// digest. At most one of Allow and AllowFile.
	AllowFile string `json:"allowFile,omitempty"`
}

// ExpansionAllow lists what expansions may skip or delegate. Each entry is a
// name or a pattern as Go's path.Match reads it ("plugin/*", "ingress-nginx/*").
type ExpansionAllow struct {
	// SkipSteps are the steps an expansion's skipSteps may name.
	SkipSteps []string `json:"skipSteps,omitempty"`
	// SkipConditions are the checks (PLUGIN/CHECK) its skipConditions may name.
	SkipConditions []string `json:"skipConditions,omitempty"`
	// DelegateConditions are the checks (PLUGIN/CHECK) its delegateConditions
	// may hand to a site operator.
	DelegateConditions []string `json:"delegateConditions,omitempty"`
}

// Provider selects the provider; exactly one field is set.
type Provider struct {
	// Local runs the control plane on this machine with simulated nodes.
	Local *LocalProvider `json:"local,omitempty"`
	// AWS holds the values of the rendered cloud template (cloud/template.json), a
	// CloudFormation template for the cluster's machines on AWS, and where kubeplug up
	// deploys it (docs/aws.md).
	AWS *AWSProvider `json:"aws,omitempty"`
	// Hosts builds the cluster on Linux hosts that already exist, over SSH: it
	// delivers each pool's rendered boot files to its hosts and applies them
	// (docs/hosts.md).
	Hosts *HostsProvider `json:"hosts,omitempty"`
}

// HostsProvider lists the existing hosts of each node pool and how kubeplug
// reaches them over SSH.
type HostsProvider struct {
	// SSH is how every host is reached unless the host says otherwise.
	SSH *HostSSH `json:"ssh,omitempty"`
	// KnownHostsFile is the OpenSSH known_hosts file the hosts' keys are
	// checked against. Strict: a host whose key is not in it, or differs from
	// it, is refused naming the key's SHA256 fingerprint (`kubeplug up
	// --accept-new-host-keys` adds unknown keys, never changed ones). Default
	// ~/.ssh/known_hosts.
	KnownHostsFile string `json:"knownHostsFile,omitempty"`
	// Pools assigns hosts to the cluster's node pools; the control-plane pool
	// is named control-plane and has one host. A pool's count must equal its
	// number of hosts.
	Pools []HostPool `json:"pools" jsonschema:"minItems=1"`
	// Timeouts bound the provider's steps on the hosts; each unset one has
	// its default.
	Timeouts *HostTimeouts `json:"timeouts,omitempty"`
}

// HostTimeouts bound the hosts provider's steps, each a Go duration (for
// example 90s, 5m).
type HostTimeouts struct {
	// Connect bounds a TCP connect and an SSH handshake, a jump host's too.
	// Default 15s.
	Connect string `json:"connect,omitempty"`
	// Command bounds each command on a host, an upload of the largest node
	// program included. Default 5m.
	Command string `json:"command,omitempty"`
	// Ready bounds the wait for the control plane's API server, for each
	// Node to be Ready and for the control plane's static Pods. Default 4m.
	Ready string `json:"ready,omitempty"`
	// Drain bounds the drain of a Node before its host is rolled or
	// removed; the Pods left are named. Default 3m.
	Drain string `json:"drain,omitempty"`
}

// HostPool is the hosts of one node pool.
type HostPool struct {
	// Name is a node pool of spec.nodePools, or control-plane.
	Name string `json:"name" jsonschema:"minLength=1"`
	// Hosts are the pool's hosts, in node order: the first is node <pool>-0.
	Hosts []Host `json:"hosts" jsonschema:"minItems=1"`
}

// Host is one existing host.
type Host struct {
	// Address is the host's IP address or DNS name: where kubeplug connects,
	// and the node's address in the cluster.
	Address string `json:"address" jsonschema:"minLength=1"`
	// SSH overrides spec.provider.hosts.ssh for this host, field by field.
	SSH *HostSSH `json:"ssh,omitempty"`
}

// HostSSH is how kubeplug reaches a host over SSH.
type HostSSH struct {
	// Port of the host's SSH server. Default 22.
	Port int `json:"port,omitempty" jsonschema:"minimum=1,maximum=65535"`
	// User to log in as: root, or a user that may run sudo without a
	// password. Default root.
	User string `json:"user,omitempty"`
	// KeyFile is an unencrypted private key file (OpenSSH or PEM format); a
	// leading ~/ is the user's home, a relative path is read from the
	// directory kubeplug runs in.
	KeyFile string `json:"keyFile,omitempty"`
	// Agent uses the keys of the SSH agent at $SSH_AUTH_SOCK (after KeyFile's,
	// when both are set).
	Agent bool `json:"agent,omitempty"`
	// KeySecretRef is a private key in a Secret of the management cluster,
	// for the controller, which reads it through its client (after KeyFile's
	// key, before the agent's). The CLI has no management cluster and refuses
	// it.
	KeySecretRef *SecretKeyRef `json:"keySecretRef,omitempty"`
	// Jump is a bastion the connection goes through, as [user@]host[:port];
	// the same key, agent and known-hosts file are used for it.
	Jump string `json:"jump,omitempty"`
}

// SecretKeyRef names one key of a Secret.
type SecretKeyRef struct {
	Namespace string `json:"namespace" jsonschema:"minLength=1"`
	Name      string `json:"name" jsonschema:"minLength=1"`
	Key       string `json:"key" jsonschema:"minLength=1"`
}

// AWSProvider is the values of the cloud template. Each becomes the default of a
// template parameter, so a deploy may still override it.
type AWSProvider struct {
	// ImageID is the machine image (AMI) of every machine: one with the kubelet,
	// containerd and kubeplug (as /usr/local/bin/kubeplug) installed. Default: none,
	// the ImageId parameter must then be given when the template is deployed.
	ImageID string `json:"imageID,omitempty" jsonschema:"pattern=^ami-[0-9a-f]+$"`
	// InstanceType of the worker pools' machines. Default m6i.large.
	InstanceType string `json:"instanceType,omitempty"`
	// ControlPlaneInstanceType of the control-plane machines. Default m6i.large.
	ControlPlaneInstanceType string `json:"controlPlaneInstanceType,omitempty"`
	// VPCID is an existing VPC to put the cluster in, with SubnetIDs; empty creates a
	// VPC with one public subnet in each of the region's first two availability zones.
	VPCID string `json:"vpcID,omitempty" jsonschema:"pattern=^vpc-[0-9a-f]+$"`
	// SubnetIDs are subnets of VPCID for the machines and the API server's load
	// balancer, at least two in different availability zones. Only with VPCID.
	SubnetIDs []string `json:"subnetIDs,omitempty"`
	// VPCCIDR is the address range of a created VPC. Default 10.0.0.0/16.
	VPCCIDR string `json:"vpcCIDR,omitempty"`
	// APIServerCIDR is the range allowed to reach the API server through its load
	// balancer. Default 0.0.0.0/0.
	APIServerCIDR string `json:"apiServerCIDR,omitempty"`

	// Region to deploy to. Default: the standard AWS chain's (AWS_REGION, the
	// profile's region).
	Region string `json:"region,omitempty"`
	// Profile of the shared AWS configuration files. Default: AWS_PROFILE, else default.
	Profile string `json:"profile,omitempty"`
	// Endpoint overrides the URL of every AWS service, for emulators and private
	// endpoints. Default: AWS_ENDPOINT_URL, else AWS's own endpoints.
	Endpoint string `json:"endpoint,omitempty" jsonschema:"pattern=^https?://"`
	// Bucket is the S3 bucket kubeplug up uploads the rendered files to, by
	// content digest; created when missing. Required by kubeplug up.
	Bucket string `json:"bucket,omitempty" jsonschema:"pattern=^[a-z0-9][-a-z0-9]+[a-z0-9]$,maxLength=63"`
	// StackPrefix starts the name of every stack and of every object key of the
	// cluster. Default: kubeplug-<cluster name>.
	StackPrefix string `json:"stackPrefix,omitempty" jsonschema:"pattern=^[A-Za-z][-A-Za-z0-9]*$,maxLength=100"`
	// Tags are put on every stack, and so on the stacks' resources.
	Tags map[string]string `json:"tags,omitempty"`
}

// LocalProvider settings.
type LocalProvider struct {
	// APIServerPort is the port the API server listens on, on 127.0.0.1.
	// Default: a port of the cluster's own block of loopback ports (outside
	// the kernel's ephemeral range, docs/ports.md), chosen when the cluster is
	// first created and kept.
	APIServerPort int `json:"apiServerPort,omitempty" jsonschema:"minimum=1,maximum=65535"`
	// RealPools names node pools whose nodes are real: each runs a kubelet,
	// containerd, runc, the CNI bridge plugins and kube-proxy on this machine,
	// in a network namespace of its own, so Pods really run (`kubectl logs`,
	// `exec`, Services). Needs root, overlayfs and cgroups (`make node-deps
	// localnode` installs and builds the programs). The other pools' nodes are
	// simulated (kwok), which scales to hundreds of nodes.
	RealPools []string `json:"realPools,omitempty"`
	// MachinePools names node pools whose nodes are systemd machines: each
	// boots the machine image (`make machine-image`: Debian with systemd,
	// cloud-init, containerd and the kubelet) under runc from exactly the
	// cloud-init file `render` writes for its pool, delivered through
	// cloud-init's NoCloud seed as a cloud delivers user data, and joins with
	// a bootstrap token and the kubelet's TLS bootstrap. The pool's node hooks
	// run inside the machine. Naming the control-plane pool runs the control
	// plane on a machine too: the rendered static Pods under its kubelet. Needs
	// root, overlayfs and runc. docs/machines.md.
	MachinePools []string `json:"machinePools,omitempty"`
}

// ControlPlaneSpec sizes the control plane.
type ControlPlaneSpec struct {
	// Count of control-plane machines. Default 1.
	Count int `json:"count,omitempty" jsonschema:"minimum=1"`
}

// NodePool is a group of identical machines.
type NodePool struct {
	// Name of the pool, a DNS label.
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=63"`
	// Role of the machines. Default worker.
	Role string `json:"role,omitempty" jsonschema:"enum=worker,enum=control-plane"`
	// Count of machines.
	Count int `json:"count" jsonschema:"minimum=0"`
	// MinSize and MaxSize bound the pool for an autoscaler: the aws provider's
	// Auto Scaling group keeps between MinSize and MaxSize machines, starting
	// at Count. Default: Count. Providers whose pools do not scale (local,
	// hosts) refuse a bound other than Count.
	MinSize *int `json:"minSize,omitempty" jsonschema:"minimum=0"`
	MaxSize *int `json:"maxSize,omitempty" jsonschema:"minimum=0"`
	// Labels put on the pool's Nodes.
	Labels map[string]string `json:"labels,omitempty"`
	// Taints put on the pool's Nodes.
	Taints []Taint `json:"taints,omitempty"`
}

// ClusterPlugins says where plugins come from and which are enabled.
type ClusterPlugins struct {
	// Sources are extra plugin locations, searched after the built-in and contrib ones.
	Sources []Source `json:"sources,omitempty"`
	// Order optionally fixes the order of some plugins: these first, in this order.
	Order []string `json:"order,omitempty"`
	// Enabled plugins.
	Enabled []PluginRef `json:"enabled,omitempty"`
}

// Source is a plugin location. Exactly one field is set.
type Source struct {
	// Dir is a directory of plugin packages, relative to cluster.yaml; or a
	// package archive; or a .yaml file of KKP ApplicationDefinitions, each
	// version a plugin version (see docs/helm.md).
	Dir string `json:"dir,omitempty"`
	// Catalog is a remote catalog URL (https:// index or oci:// repository).
	Catalog string `json:"catalog,omitempty"`
	// Type is the catalog's kind: empty for a kubeplug catalog, helm for a Helm
	// chart repository (Catalog is its https:// URL or index.yaml) or the Helm
	// charts in an OCI registry (Catalog is oci://HOST/PREFIX or a chart's
	// repository), whose every chart version is a plugin version that installs
	// the chart. See docs/helm.md.
	Type string `json:"type,omitempty" jsonschema:"enum=,enum=helm"`
	// Verify is the source's trust policy: which keys sign its packages, and whether
	// a signature is required. For dir and oci:// catalog sources.
	Verify *SourceVerify `json:"verify,omitempty"`
	// CAFile is a PEM file of certificate authorities trusted for this catalog
	// besides the system's (a private registry or index server), relative to
	// cluster.yaml. For catalog sources.
	CAFile string `json:"caFile,omitempty"`
	// RegistryConfig is a docker config file holding the credentials for this
	// oci:// catalog, relative to cluster.yaml; default the usual one
	// ($DOCKER_CONFIG/config.json or ~/.docker/config.json).
	RegistryConfig string `json:"registryConfig,omitempty"`
}

// SourceVerify is a source's trust policy (see docs/distribution.md). A package
// archive is signed by ARCHIVE.sig beside it, written by `kubeplug plugin sign`.
type SourceVerify struct {
	// Keys are public key files (from `kubeplug plugin keygen` or cosign), relative to
	// cluster.yaml; a signature must verify with one of them.
	// For dir and oci:// catalog sources; an oci:// source's keys also check the
	// cosign signatures of the Helm charts in its registry.
	Keys []string `json:"keys,omitempty"`
	// Keyring is, for a type: helm source, a PGP keyring (as `helm verify
	// --keyring` takes it, binary or armored) relative to cluster.yaml: a chart's
	// provenance file (ARCHIVE.prov beside it) must be signed by one of its keys
	// and give the archive's sha256. It applies to the source's charts and to
	// charts by reference and dependencies fetched from the same repository.
	Keyring string `json:"keyring,omitempty"`
	// Required refuses a package without a signature (and every unpacked directory,
	// which cannot be signed), or a chart without a provenance file. Without it an
	// unsigned package is accepted, but a signature that does not verify is always
	// refused.
	Required bool `json:"required,omitempty"`
}

// PluginRef enables a plugin in a cluster.
type PluginRef struct {
	// Name of the plugin.
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=63"`
	// Version is a semver constraint. Empty means the newest.
	Version string `json:"version,omitempty"`
	// Values for the plugin, deep-merged over its defaults.
	Values Values `json:"values,omitempty"`
	// ValuesFrom merges values from files and environment variables after Values, in order.
	ValuesFrom []ValuesSource `json:"valuesFrom,omitempty"`
	// NodePools scopes the plugin's node contributions to these pools, each with
	// optional values deep-merged over the cluster-level ones.
	NodePools []PoolValues `json:"nodePools,omitempty"`
}

// ValuesSource is a file or an environment variable holding values. Exactly one of
// File and Env is set.
type ValuesSource struct {
	// File is a YAML file, relative to cluster.yaml, merged at Path (default the root).
	File string `json:"file,omitempty"`
	// Env is an environment variable whose string value is set at Path.
	Env string `json:"env,omitempty" jsonschema:"pattern=^[A-Za-z_][A-Za-z0-9_]*$"`
	// Path is a JSON pointer into the values; required with Env.
	Path string `json:"path,omitempty"`
	// Optional skips a missing file or unset variable instead of failing.
	Optional bool `json:"optional,omitempty"`
}

// PoolValues scopes a plugin to a node pool with pool-specific values.
type PoolValues struct {
	// Name of the node pool.
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=63"`
	// Values deep-merged over the cluster-level values for this pool only.
	Values Values `json:"values,omitempty"`
}
