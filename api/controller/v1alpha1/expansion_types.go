package v1alpha1

// ExpansionSite is the site's side of the expansions a run merges: the
// registry the cluster pulls from and what an expansion may skip or
// delegate. It is what `kubeplug up`/`apply` take from --site-registry and
// the cluster file's spec.expansions.allow; on the controller's path it is a
// field of the resource whose run merges the expansions (a PluginInstallation,
// a rollout's template, a ManagedCluster), beside the expansions and the keys
// they are verified with (docs/controller.md).
type ExpansionSite struct {
	// Registry is the site registry: the expansions' images (and charts) are
	// pushed there before deploying, and every image reference of the
	// rendered objects is rewritten to it.
	Registry *SiteRegistry `json:"registry,omitempty"`
	// Allow, when set, says what an expansion may skip or delegate: a skip
	// step, skipped check or delegated check it does not list refuses the
	// expansion (Stalled, reason ExpansionRefused, naming the expansion and
	// the step) before anything is applied. Unset, every skip and delegation
	// is allowed, each still named in status.expansions.
	Allow *ExpansionAllow `json:"allow,omitempty"`
}

// SiteRegistry is a registry the cluster pulls from. Its CA and credentials
// are read from Secrets of the resource's namespace, never given inline.
type SiteRegistry struct {
	// Address is HOST[:PORT] of the registry.
	Address string `json:"address" jsonschema:"minLength=1,maxLength=253,pattern=^[A-Za-z0-9.:\\[\\]-]+$"`
	// PlainHTTP talks plain HTTP to it (a loopback address is plain HTTP
	// without it).
	PlainHTTP bool `json:"plainHTTP,omitempty"`
	// CASecret is a Secret holding the PEM CA bundle its certificate is
	// verified with, under Key (default "ca.crt").
	CASecret *KeyRefOptionalKey `json:"caSecret,omitempty"`
	// CredentialsSecret is a kubernetes.io/dockerconfigjson Secret (key
	// ".dockerconfigjson") holding the credentials for Address.
	CredentialsSecret string `json:"credentialsSecret,omitempty" jsonschema:"maxLength=253"`
}

// ExpansionAllow lists what expansions may skip or delegate, as a cluster
// file's spec.expansions.allow. Each entry is a name or a pattern as Go's
// path.Match reads it ("plugin/*", "provider/*").
type ExpansionAllow struct {
	// SkipSteps are the steps an expansion's skipSteps may name.
	SkipSteps []string `json:"skipSteps,omitempty" jsonschema:"maxItems=64"`
	// SkipConditions are the checks (PLUGIN/CHECK) its skipConditions may name.
	SkipConditions []string `json:"skipConditions,omitempty" jsonschema:"maxItems=64"`
	// DelegateConditions are the checks (PLUGIN/CHECK) its delegateConditions
	// may hand to a site operator.
	DelegateConditions []string `json:"delegateConditions,omitempty" jsonschema:"maxItems=64"`
}
