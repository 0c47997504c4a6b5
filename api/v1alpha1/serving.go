package v1alpha1

// ServedAPI is an API group a plugin serves through the cluster's API server: the
// API server sends /apis/<group>/<version> to the plugin's Service (API
// aggregation). kubeplug generates, per API, an APIService for each version with
// the serving CA in caBundle, a serving CA and certificate for the Service (as
// Secrets, renewed before they expire) and the RBAC the server needs to delegate
// authentication and authorization to the cluster.
type ServedAPI struct {
	// Group is the API group, for example metrics.example.com.
	Group string `json:"group" jsonschema:"minLength=1,maxLength=253,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$"`
	// Versions served, for example [v1alpha1]; one APIService each.
	Versions []string `json:"versions" jsonschema:"minItems=1,uniqueItems=true"`
	// Service is the plugin's Service that serves the API over HTTPS.
	Service ServiceRef `json:"service"`
	// ServiceAccount the server runs as, in the Service's namespace: it is bound to
	// system:auth-delegator and to the extension-apiserver-authentication-reader
	// Role. Default: the Service's name.
	ServiceAccount string `json:"serviceAccount,omitempty" jsonschema:"pattern=^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$,maxLength=253"`
	// GroupPriorityMinimum orders the group in discovery. Default 1000.
	GroupPriorityMinimum int32 `json:"groupPriorityMinimum,omitempty" jsonschema:"minimum=1,maximum=20000"`
	// VersionPriority orders the versions within the group. Default 15.
	VersionPriority int32 `json:"versionPriority,omitempty" jsonschema:"minimum=1,maximum=1000"`
}

// ServiceRef names a Service port that serves HTTPS.
type ServiceRef struct {
	// Namespace of the Service.
	Namespace string `json:"namespace" jsonschema:"minLength=1,maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// Name of the Service.
	Name string `json:"name" jsonschema:"minLength=1,maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// Port of the Service. Default 443.
	Port int32 `json:"port,omitempty" jsonschema:"minimum=1,maximum=65535"`
}

// Webhook types.
const (
	WebhookValidating = "validating"
	WebhookMutating   = "mutating"
)

// Webhook is an admission webhook a plugin serves. kubeplug puts it in a
// Validating- or MutatingWebhookConfiguration named after the plugin, with the
// Service's CA in caBundle, applied only after the plugin's other objects are
// ready; its defaults keep a dead webhook from blocking the cluster or kubeplug.
type Webhook struct {
	// Name is the webhook's fully qualified name, for example deny.example.com.
	Name string `json:"name" jsonschema:"minLength=3,maxLength=253,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$"`
	// Type is validating or mutating.
	Type string `json:"type" jsonschema:"enum=validating,enum=mutating"`
	// Service receives the AdmissionReview requests over HTTPS.
	Service ServiceRef `json:"service"`
	// Path on the Service, for example /validate. Default /.
	Path string `json:"path,omitempty" jsonschema:"pattern=^/"`
	// Rules select the requests sent to the webhook.
	Rules []WebhookRule `json:"rules" jsonschema:"minItems=1"`
	// FailurePolicy is Ignore or Fail. Default Ignore: a dead webhook lets requests
	// through instead of blocking them.
	FailurePolicy string `json:"failurePolicy,omitempty" jsonschema:"enum=Ignore,enum=Fail"`
	// TimeoutSeconds per request, 1 to 30. Default 5.
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty" jsonschema:"minimum=1,maximum=30"`
	// NamespaceSelector replaces the default selector, which excludes kube-system,
	// kube-public, kube-node-lease, kubeplug-system and the webhook's own namespace
	// (so the server's own Pods can always be recreated). A label selector.
	NamespaceSelector map[string]any `json:"namespaceSelector,omitempty"`
	// ObjectSelector limits the webhook to objects with these labels. A label selector.
	ObjectSelector map[string]any `json:"objectSelector,omitempty"`
	// SideEffects is None or NoneOnDryRun. Default None.
	SideEffects string `json:"sideEffects,omitempty" jsonschema:"enum=None,enum=NoneOnDryRun"`
	// ReinvocationPolicy (mutating only) is Never or IfNeeded. Default Never.
	ReinvocationPolicy string `json:"reinvocationPolicy,omitempty" jsonschema:"enum=Never,enum=IfNeeded"`
}

// WebhookRule selects admission requests, as in admissionregistration.k8s.io/v1.
type WebhookRule struct {
	// Operations: CREATE, UPDATE, DELETE, CONNECT or *.
	Operations []string `json:"operations" jsonschema:"minItems=1"`
	// APIGroups, "" for the core group, * for all.
	APIGroups []string `json:"apiGroups" jsonschema:"minItems=1"`
	// APIVersions, * for all.
	APIVersions []string `json:"apiVersions" jsonschema:"minItems=1"`
	// Resources, for example pods or deployments/scale.
	Resources []string `json:"resources" jsonschema:"minItems=1"`
	// Scope is Cluster, Namespaced or *. Default *.
	Scope string `json:"scope,omitempty" jsonschema:"enum=Cluster,enum=Namespaced,enum=*"`
}
