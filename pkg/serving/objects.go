package serving

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

// Annotations on generated objects.
const (
	// AnnotationInjectCA on an APIService or webhook configuration names the CA
	// Secret ("namespace/name") whose bundle Inject puts in its caBundle fields.
	AnnotationInjectCA = "kubeplug.dev/inject-ca-from"
	// AnnotationCA on a Secret makes it the serving CA of a Service
	// ("namespace/service"); Inject fills ca.crt, ca.key and bundle.crt.
	AnnotationCA = "kubeplug.dev/serving-ca-for"
	// AnnotationCert on a kubernetes.io/tls Secret makes it the serving
	// certificate of a Service ("namespace/service"); Inject fills tls.crt, tls.key
	// and ca.crt (the bundle).
	AnnotationCert = "kubeplug.dev/serving-cert-for"
)

// ExcludedNamespaces are left out of a webhook's default namespace selector: the
// cluster's own, kubeplug's, and (added per webhook) the webhook's own namespace,
// so that a dead webhook cannot stop the cluster, kubeplug or its own recovery.
var ExcludedNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", "kubeplug-system"}

// Defaults.
const (
	DefaultPort                 = 443
	DefaultGroupPriorityMinimum = 1000
	DefaultVersionPriority      = 15
	DefaultTimeoutSeconds       = 5
)

// StorageLabel marks the Secrets (and, before they moved, the ConfigMaps) that
// keep a served API's objects (the delegated storage of sdk/apiserver), valued
// <plural>.<group>.
const StorageLabel = "apiserver.sdk.kubeplug.dev/resource"

// StorageWriters may write a served API's storage besides its server: the
// controllers that empty a namespace being deleted.
var StorageWriters = []string{
	"system:serviceaccount:kube-system:namespace-controller",
	"system:serviceaccount:kube-system:generic-garbage-collector",
}

// CASecretName names a Service's serving CA Secret.
func CASecretName(service string) string { return service + "-serving-ca" }

// CertSecretName names a Service's serving certificate Secret (kubernetes.io/tls),
// the one the server mounts.
func CertSecretName(service string) string { return service + "-serving-cert" }

// Objects returns the objects that serve a plugin's APIs and webhooks, in a
// stable order: per Service its Secrets, then RBAC, APIServices, the webhook
// configurations, and per API the RBAC and admission policy of its storage.
func Objects(plugin string, apis []v1alpha1.ServedAPI, hooks []v1alpha1.Webhook) []map[string]any {
	var out []map[string]any
	seen := map[string]bool{}
	secrets := func(s v1alpha1.ServiceRef) {
		key := s.Namespace + "/" + s.Name
		if seen[key] {
			return
		}
		seen[key] = true
		out = append(out,
			object("v1", "Secret", s.Namespace, CASecretName(s.Name), map[string]string{AnnotationCA: key}, map[string]any{
				"type": "Opaque",
				"data": map[string]any{"ca.crt": "", "ca.key": "", "bundle.crt": ""},
			}),
			object("v1", "Secret", s.Namespace, CertSecretName(s.Name), map[string]string{AnnotationCert: key}, map[string]any{
				"type": "kubernetes.io/tls",
				"data": map[string]any{"tls.crt": "", "tls.key": "", "ca.crt": ""},
			}))
	}
	for _, a := range apis {
		secrets(a.Service)
	}
	for _, h := range hooks {
		secrets(h.Service)
	}
	bound := map[string]bool{}
	for _, a := range apis {
		sa := a.ServiceAccount
		if sa == "" {
			sa = a.Service.Name
		}
		key := a.Service.Namespace + ":" + sa
		if bound[key] {
			continue
		}
		bound[key] = true
		subject := []any{map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": a.Service.Namespace}}
		out = append(out,
			object("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "kubeplug:"+plugin+":"+key+":auth-delegator", nil, map[string]any{
				"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
				"subjects": subject,
			}),
			object("rbac.authorization.k8s.io/v1", "RoleBinding", "kube-system", "kubeplug:"+plugin+":"+key+":auth-reader", nil, map[string]any{
				"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"},
				"subjects": subject,
			}))
	}
	for _, a := range apis {
		for _, v := range a.Versions {
			out = append(out, object("apiregistration.k8s.io/v1", "APIService", "", v+"."+a.Group,
				map[string]string{AnnotationInjectCA: a.Service.Namespace + "/" + CASecretName(a.Service.Name)},
				map[string]any{"spec": map[string]any{
					"group":                a.Group,
					"version":              v,
					"service":              serviceRef(a.Service, ""),
					"groupPriorityMinimum": int64(orDefault(a.GroupPriorityMinimum, DefaultGroupPriorityMinimum)),
					"versionPriority":      int64(orDefault(a.VersionPriority, DefaultVersionPriority)),
				}}))
		}
	}
	for _, typ := range []string{v1alpha1.WebhookValidating, v1alpha1.WebhookMutating} {
		var whs []any
		var from []string
		for _, h := range hooks {
			if h.Type != typ {
				continue
			}
			whs = append(whs, webhook(h))
			if f := h.Service.Namespace + "/" + CASecretName(h.Service.Name); !slices.Contains(from, f) {
				from = append(from, f)
			}
		}
		if len(whs) == 0 {
			continue
		}
		kind := "ValidatingWebhookConfiguration"
		if typ == v1alpha1.WebhookMutating {
			kind = "MutatingWebhookConfiguration"
		}
		ann := map[string]string{AnnotationInjectCA: strings.Join(from, ",")}
		out = append(out, object("admissionregistration.k8s.io/v1", kind, "", "kubeplug-"+plugin, ann, map[string]any{"webhooks": whs}))
	}
	for _, a := range apis {
		out = append(out, storageObjects(plugin, a)...)
	}
	return out
}

func webhook(h v1alpha1.Webhook) map[string]any {
	path := h.Path
	if path == "" {
		path = "/"
	}
	var rules []any
	for _, r := range h.Rules {
		scope := r.Scope
		if scope == "" {
			scope = "*"
		}
		rules = append(rules, map[string]any{
			"operations": strs(r.Operations), "apiGroups": strs(r.APIGroups),
			"apiVersions": strs(r.APIVersions), "resources": strs(r.Resources), "scope": scope,
		})
	}
	ns := h.NamespaceSelector
	if ns == nil {
		excluded := append(slices.Clone(ExcludedNamespaces), h.Service.Namespace)
		slices.Sort(excluded)
		ns = map[string]any{"matchExpressions": []any{map[string]any{
			"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": strs(slices.Compact(excluded)),
		}}}
	}
	w := map[string]any{
		"name":                    h.Name,
		"clientConfig":            map[string]any{"service": serviceRef(h.Service, path)},
		"rules":                   rules,
		"failurePolicy":           orString(h.FailurePolicy, "Ignore"),
		"timeoutSeconds":          int64(orDefault(h.TimeoutSeconds, DefaultTimeoutSeconds)),
		"sideEffects":             orString(h.SideEffects, "None"),
		"admissionReviewVersions": []any{"v1"},
		"namespaceSelector":       ns,
		"matchPolicy":             "Equivalent",
	}
	if h.ObjectSelector != nil {
		w["objectSelector"] = h.ObjectSelector
	}
	if h.Type == v1alpha1.WebhookMutating {
		w["reinvocationPolicy"] = orString(h.ReinvocationPolicy, "Never")
	}
	return w
}

func serviceRef(s v1alpha1.ServiceRef, path string) map[string]any {
	m := map[string]any{"namespace": s.Namespace, "name": s.Name, "port": int64(orDefault(s.Port, DefaultPort))}
	if path != "" {
		m["path"] = path
	}
	return m
}

func object(apiVersion, kind, ns, name string, ann map[string]string, rest map[string]any) map[string]any {
	md := map[string]any{"name": name}
	if ns != "" {
		md["namespace"] = ns
	}
	if len(ann) > 0 {
		a := map[string]any{}
		for k, v := range ann {
			a[k] = v
		}
		md["annotations"] = a
	}
	o := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md}
	for k, v := range rest {
		o[k] = v
	}
	return o
}

func strs(in []string) []any {
	out := make([]any, len(in))
	for i, s := range in {
		out[i] = s
	}
	return out
}

func orDefault(v, def int32) int32 {
	if v == 0 {
		return def
	}
	return v
}

func orString(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Validate reports problems the schema cannot see, as (JSON pointer suffix,
// message) pairs relative to contributes.kubernetes.
func Validate(apis []v1alpha1.ServedAPI, hooks []v1alpha1.Webhook) [][2]string {
	var out [][2]string
	groups := map[string]int{}
	for i, a := range apis {
		if j, ok := groups[a.Group]; ok {
			out = append(out, [2]string{"/apis/" + strconv.Itoa(i) + "/group", fmt.Sprintf("group %s is already served by apis[%d]", a.Group, j)})
		}
		groups[a.Group] = i
	}
	names := map[string]int{}
	for i, h := range hooks {
		if j, ok := names[h.Type+"/"+h.Name]; ok {
			out = append(out, [2]string{"/webhooks/" + strconv.Itoa(i) + "/name", fmt.Sprintf("webhook %s is already declared by webhooks[%d]", h.Name, j)})
		}
		names[h.Type+"/"+h.Name] = i
		if h.ReinvocationPolicy != "" && h.Type != v1alpha1.WebhookMutating {
			out = append(out, [2]string{"/webhooks/" + strconv.Itoa(i) + "/reinvocationPolicy", "reinvocationPolicy applies to mutating webhooks only"})
		}
	}
	return out
}

// storageObjects make a served API's storage (the Secrets of the Service's
// namespace labelled StorageLabel=<plural>.<group>, of type
// kubeplug.dev/served-storage) the server's alone: a Role and RoleBinding give
// its ServiceAccount the Secrets of its namespace (and its ConfigMaps to read
// and delete, for the move of an earlier server's ConfigMap storage), and a
// ValidatingAdmissionPolicy refuses every other writer of the storage, so
// that no one changes the API's objects behind its validation. Reads: no one
// else is granted them here, and the built-in view role (and whatever grants a
// namespace's ConfigMaps without its Secrets) does not read Secrets.
func storageObjects(plugin string, a v1alpha1.ServedAPI) []map[string]any {
	sa := a.ServiceAccount
	if sa == "" {
		sa = a.Service.Name
	}
	ns := a.Service.Namespace
	user := "system:serviceaccount:" + ns + ":" + sa
	name := "kubeplug:" + plugin + ":" + a.Group + ":storage"
	policy := "kubeplug-" + plugin + "-storage-" + a.Group
	of := func(o string) string {
		return "(" + o + " != null && has(" + o + ".metadata.labels) && '" + StorageLabel + "' in " + o + ".metadata.labels && " +
			o + ".metadata.labels['" + StorageLabel + "'].endsWith('." + a.Group + "'))"
	}
	var exempt []string
	for _, w := range StorageWriters {
		exempt = append(exempt, "'"+w+"'")
	}
	return []map[string]any{
		object("rbac.authorization.k8s.io/v1", "Role", ns, name, nil, map[string]any{
			"rules": []any{
				map[string]any{
					"apiGroups": []any{""}, "resources": []any{"secrets"},
					"verbs": strs([]string{"get", "list", "watch", "create", "update", "patch", "delete"}),
				},
				map[string]any{
					"apiGroups": []any{""}, "resources": []any{"configmaps"},
					"verbs": strs([]string{"get", "list", "delete"}),
				},
			},
		}),
		object("rbac.authorization.k8s.io/v1", "RoleBinding", ns, name, nil, map[string]any{
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": ns}},
		}),
		object("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "", policy, nil, map[string]any{"spec": map[string]any{
			"failurePolicy": "Fail",
			"matchConstraints": map[string]any{
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}},
				"resourceRules": []any{map[string]any{
					"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "resources": []any{"secrets", "configmaps"},
					"operations": strs([]string{"CREATE", "UPDATE", "DELETE"}),
				}},
			},
			"matchConditions": []any{
				map[string]any{"name": "storage", "expression": of("object") + " || " + of("oldObject")},
				map[string]any{"name": "not-namespace-cleanup", "expression": "!(request.userInfo.username in [" + strings.Join(exempt, ", ") + "])"},
			},
			"validations": []any{map[string]any{
				"expression": "request.userInfo.username == '" + user + "'",
				"messageExpression": "'Secrets and ConfigMaps labelled " + StorageLabel + " are the storage of " + a.Group +
					" and written only by its server (" + user + "), not by ' + request.userInfo.username + ': change the objects through the API'",
				"reason": "Forbidden",
			}},
		}}),
		object("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", "", policy, nil, map[string]any{"spec": map[string]any{
			"policyName":        policy,
			"validationActions": []any{"Deny"},
		}}),
	}
}
