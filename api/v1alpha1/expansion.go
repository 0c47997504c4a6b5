package v1alpha1

// KindExpansion is the kind of expansion.yaml.
const KindExpansion = "Expansion"

// Expansion is the manifest of an expansion package: expansion.yaml at the root of a
// directory or archive that carries what an air-gapped site needs besides the
// cluster file (plugin packages, charts, images, files, hooks) and what it changes
// in kubeplug's defaults (overrides, skipped steps, skipped and delegated
// conditions). See docs/expansions.md.
type Expansion struct {
	// APIVersion must be kubeplug.dev/v1alpha1.
	APIVersion string `json:"apiVersion" jsonschema:"enum=kubeplug.dev/v1alpha1"`
	// Kind must be Expansion.
	Kind string `json:"kind" jsonschema:"enum=Expansion"`
	// Metadata names and versions the expansion.
	Metadata ExpansionMetadata `json:"metadata"`
	// Spec is what the expansion carries and changes.
	Spec ExpansionSpec `json:"spec"`
}

// ExpansionMetadata identifies one version of an expansion.
type ExpansionMetadata struct {
	// Name is a DNS label of at most 53 characters: its node files and hooks are
	// contributed as plugin expansion-NAME.
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=53"`
	// Version is a semantic version, for example 1.0.0.
	Version string `json:"version" jsonschema:"pattern=^(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\\+[0-9A-Za-z.-]+)?$"`
	// Description says in one line what the expansion is for.
	Description string `json:"description,omitempty"`
}

// ExpansionSpec is what an expansion carries and changes.
type ExpansionSpec struct {
	// Plugins are plugin packages the expansion carries: archives inside it, or
	// references to an OCI registry pinned by digest (which `expansion create`
	// pulls into the package).
	Plugins []ExpansionPlugin `json:"plugins,omitempty"`
	// Charts are Helm charts inside the expansion (a chart directory or a .tgz).
	Charts []ExpansionChart `json:"charts,omitempty"`
	// Images are container images the expansion carries, by full reference (for
	// example registry.example.com/team/app:v1). They are kept in the OCI image
	// layout under images/ inside the package.
	Images []string `json:"images,omitempty" jsonschema:"uniqueItems=true"`
	// Nodes adds files and node hooks to the machines, as a plugin's
	// contributes.nodes does; sources are paths inside the expansion.
	Nodes []NodeContribution `json:"nodes,omitempty"`
	// Hooks run on the machine that runs kubeplug at the installer's entry points.
	Hooks []InstallerHook `json:"hooks,omitempty"`
	// Overrides set values of plugins (the built-in control-plane plugin
	// included) and of the provider.
	Overrides *ExpansionOverrides `json:"overrides,omitempty"`
	// SkipSteps names steps the site provides itself: "plugin/NAME" for a
	// built-in plugin the site replaces, or a pipeline step (see
	// docs/expansions.md for the list). An unknown name is an error.
	SkipSteps []string `json:"skipSteps,omitempty" jsonschema:"uniqueItems=true"`
	// SkipConditions names plugin checks ("PLUGIN/CHECK") that kubeplug does not
	// run; each is reported as skipped.
	SkipConditions []string `json:"skipConditions,omitempty" jsonschema:"uniqueItems=true"`
	// DelegateConditions names plugin checks an external operator proves instead
	// of kubeplug.
	DelegateConditions []DelegatedCondition `json:"delegateConditions,omitempty"`
}

// ExpansionPlugin is one plugin package of an expansion. Exactly one of Path and
// Ref is set.
type ExpansionPlugin struct {
	// Path is a package archive inside the expansion, for example plugins/demo-0.1.0.tgz.
	Path string `json:"path,omitempty"`
	// Ref is an OCI reference, oci://HOST/REPO/NAME:VERSION, pinned by Digest.
	Ref string `json:"ref,omitempty"`
	// Digest is the sha256 digest the referenced archive must have (sha256:HEX).
	Digest string `json:"digest,omitempty" jsonschema:"pattern=^sha256:[0-9a-f]{64}$"`
}

// ExpansionChart is one Helm chart of an expansion.
type ExpansionChart struct {
	// Name of the chart.
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=63"`
	// Path is the chart inside the expansion: a directory holding Chart.yaml, or a .tgz.
	Path string `json:"path" jsonschema:"minLength=1"`
}

// Installer hook entry points: on the machine that runs kubeplug, before the
// cluster is provisioned, once its control plane answers, and after every plugin
// is deployed and validated.
const (
	HookBeforeCluster     = "beforeCluster"
	HookControlPlaneReady = "controlPlaneReady"
	HookAfterInstall      = "afterInstall"
)

// InstallerHook is a script or command run on the machine that runs kubeplug.
type InstallerHook struct {
	// Name of the hook, unique within the expansion.
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=63"`
	// At is the entry point.
	At string `json:"at" jsonschema:"enum=beforeCluster,enum=controlPlaneReady,enum=afterInstall"`
	// Command is an argv; Script a path inside the expansion. Exactly one is set.
	Command []string `json:"command,omitempty"`
	// Script is an executable file inside the expansion.
	Script string `json:"script,omitempty"`
	// Timeout is a Go duration, for example 2m. Default 5m.
	Timeout string `json:"timeout,omitempty"`
}

// ExpansionOverrides set values that the cluster file or the defaults would
// otherwise give.
type ExpansionOverrides struct {
	// Plugins maps a plugin name to values merged over the cluster file's values
	// for it (control-plane included).
	Plugins map[string]Values `json:"plugins,omitempty"`
	// Provider is merged over the cluster file's spec.provider.
	Provider Values `json:"provider,omitempty"`
}

// DelegatedCondition is a plugin check that an external operator proves: kubeplug
// does not run it, it waits until the operator sets Condition to True.
type DelegatedCondition struct {
	// Check is the plugin check, "PLUGIN/CHECK".
	Check string `json:"check" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?/.+$"`
	// Operator names the operator that sets the condition: the name of the
	// SiteCondition object it sets it on, and how messages name it.
	Operator string `json:"operator" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=63"`
	// Condition is the condition type the operator sets to True.
	Condition string `json:"condition" jsonschema:"pattern=^[A-Za-z][A-Za-z0-9]*$"`
	// Timeout is a Go duration, for example 5m. Default 10m.
	Timeout string `json:"timeout,omitempty"`
}
