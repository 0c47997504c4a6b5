package controller

import (
	"bytes"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/api/controller/v1alpha1"
)

// DefaultImage is the controller's image unless Manifests is told another: the
// kubeplug binary, built from this repository into an image (docs/controller.md).
const DefaultImage = "ghcr.io/kubeplug/kubeplug:latest"

// ManifestOptions shape the controller's manifests.
type ManifestOptions struct {
	// Namespace the controller runs in. Default kubeplug-system.
	Namespace string
	// Image of the controller. Default DefaultImage.
	Image string
	// Replicas of the controller; more than one elect a leader, unless Shards
	// is above 1. Default 1.
	Replicas int
	// Shards, above 1, has the replicas split the target clusters in this many
	// shards (kubeplug controller --shards, each replica named by its Pod)
	// instead of electing a leader. Default 1.
	Shards int
}

// Manifests returns what installs the controller into a cluster, as one YAML
// stream: its CRDs, Namespace, ServiceAccount, RBAC and Deployment.
func Manifests(o ManifestOptions) ([]byte, error) {
	if o.Namespace == "" {
		o.Namespace = "kubeplug-system"
	}
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Replicas < 0 {
		return nil, fmt.Errorf("replicas %d: a count must be at least 1", o.Replicas)
	}
	if o.Shards < 0 {
		return nil, fmt.Errorf("shards %d: a count must be at least 1", o.Shards)
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("namespace %q: a namespace must be a DNS label (RFC 1123): %s", o.Namespace, strings.Join(errs, "; "))
	}
	var buf bytes.Buffer
	for _, crd := range v1alpha1.CRDs() {
		buf.WriteString("---\n")
		buf.Write(bytes.TrimPrefix(crd, []byte("---\n")))
	}
	labels := map[string]any{"app.kubernetes.io/name": "kubeplug-controller", "app.kubernetes.io/managed-by": "kubeplug"}
	objs := []map[string]any{
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": o.Namespace}},
		{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "kubeplug-controller", "namespace": o.Namespace, "labels": labels}},
		// The controller installs plugins, and plugins may hold any kind of
		// object: it needs what `kubeplug apply` needs, cluster-admin.
		{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": "kubeplug-controller", "labels": labels},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "kubeplug-controller", "namespace": o.Namespace}},
		},
		{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "kubeplug-controller", "namespace": o.Namespace, "labels": labels},
			"spec": map[string]any{
				"replicas": o.Replicas,
				"selector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "kubeplug-controller"}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": labels},
					"spec": map[string]any{
						"serviceAccountName": "kubeplug-controller",
						// Never on a simulated node (kwok's, label type=kwok): its Pod
						// would show Running there and run nothing.
						"affinity":        notSimulated,
						"securityContext": map[string]any{"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": map[string]any{"type": "RuntimeDefault"}},
						"containers": []any{map[string]any{
							"name":           "controller",
							"image":          o.Image,
							"args":           controllerArgs(o),
							"env":            controllerEnv(o),
							"ports":          []any{map[string]any{"name": "metrics", "containerPort": 8080}, map[string]any{"name": "probes", "containerPort": 8081}},
							"livenessProbe":  map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": "probes"}},
							"readinessProbe": map[string]any{"httpGet": map[string]any{"path": "/readyz", "port": "probes"}},
							"resources": map[string]any{
								"requests": map[string]any{"cpu": "100m", "memory": "128Mi"},
								"limits":   map[string]any{"memory": "512Mi"},
							},
							"securityContext": map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": map[string]any{"drop": []any{"ALL"}}},
							"volumeMounts":    []any{map[string]any{"name": "tmp", "mountPath": "/tmp"}},
						}},
						"volumes": []any{map[string]any{"name": "tmp", "emptyDir": map[string]any{}}},
					},
				},
			},
		},
	}
	for _, obj := range objs {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// controllerArgs are the arguments of the controller's container: leader
// election among several replicas, or shards; the Leases in its namespace.
func controllerArgs(o ManifestOptions) []any {
	args := []any{"controller", "--leader-elect=" + fmt.Sprint(o.Replicas > 1 && o.Shards <= 1), "--leader-elect-namespace=" + o.Namespace}
	if o.Shards > 1 {
		args = append(args, fmt.Sprintf("--shards=%d", o.Shards), "--replica-id=$(POD_NAME)")
	}
	return append(args, "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081")
}

// controllerEnv is the environment of the controller's container; a sharded
// replica is named by its Pod in the shard Leases.
func controllerEnv(o ManifestOptions) []any {
	env := []any{map[string]any{"name": "HOME", "value": "/tmp"}, map[string]any{"name": "GOMEMLIMIT", "value": "400MiB"}}
	if o.Shards > 1 {
		env = append(env, map[string]any{"name": "POD_NAME", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}})
	}
	return env
}

// notSimulated keeps a Pod off simulated nodes: kwok's Nodes carry the label
// type=kwok (the local provider's simulated nodes among them), and a Pod bound
// to one is reported Running without any process behind it.
var notSimulated = map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
	"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "type", "operator": "NotIn", "values": []any{"kwok"}}}}},
}}}
