package render_test

import (
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider/aws"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// fullInput is a model exercising every construct the renderers handle: flags,
// feature gates and volumes on the control plane; files, units (new, enabled, and
// drop-ins for a unit the image has), kubelet flags, labels, taints and feature gates,
// script and command hooks on pools; cloud resources, outputs, IAM for both roles and
// patches; Kubernetes objects, a Helm release with hooks, CRDs and a test hook, and
// object patches across plugins.
func fullInput(t testing.TB) render.Input {
	t.Helper()
	m := model.New(
		model.PoolSpec{Name: "workers", Role: model.RoleWorker, Count: 3},
		model.PoolSpec{Name: "gpu-nodes", Role: model.RoleWorker, Count: 1},
	)
	add := func(plugin string, c *model.Contribution) {
		t.Helper()
		if d := m.Add(plugin, c); len(d) > 0 {
			t.Fatalf("adding %s: %s", plugin, d)
		}
	}
	add("cni", &model.Contribution{
		ControlPlane: &model.ControlPlane{
			Components: map[string]*model.Component{
				model.KubeControllerManager: {Flags: map[string]model.Setting[string]{
					"allocate-node-cidrs": {Value: "true"},
					"cluster-cidr":        {Value: "10.244.0.0/16"},
				}},
			},
		},
		Pools: map[string]*model.Pool{
			"workers": {
				Files: map[string]model.File{
					"/etc/cni/net.d/10-demo.conflist": {Content: "{\n  \"cniVersion\": \"1.0.0\",\n  \"name\": \"demo\"\n}\n", Mode: "0644", Owner: "root:root"},
				},
				Units: map[string]*model.Unit{
					"cni-setup.service": {
						Content: "[Unit]\nDescription=Prepare the CNI directories\n\n[Service]\nType=oneshot\nExecStart=/usr/bin/true\nRemainAfterExit=yes\n\n[Install]\nWantedBy=multi-user.target\n",
						Enable:  true,
					},
					"containerd.service": {DropIns: map[string]model.Setting[string]{
						"20-cni.conf": {Value: "[Service]\nEnvironment=CNI_PATH=/opt/cni/bin\n"},
					}},
				},
				Kubelet: model.Kubelet{
					Flags:  map[string]model.Setting[string]{"max-pods": {Value: "110"}, "cgroup-driver": {Value: "systemd"}},
					Labels: map[string]model.Setting[string]{"kubeplug.dev/cni": {Value: "demo"}},
				},
				Hooks: []model.Hook{
					{Name: "sysctl", At: render.PhaseBeforeNodeup, Script: "#!/bin/sh\nset -eu\nsysctl -w net.ipv4.ip_forward=1\n", Behavior: "sync-enforce", Timeout: "1m"},
					{Name: "report", At: render.PhaseAfterDeploy, Command: []string{"/usr/bin/true", "--ready"}, Behavior: "async-bypass", Timeout: "30s", When: "cluster.kubernetesVersion >= '1.34'"},
				},
			},
			model.ControlPlanePool: {
				Kubelet: model.Kubelet{
					Taints: []model.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: "NoSchedule"}},
				},
			},
		},
		Cloud: &model.Cloud{
			IAM: map[string][]model.Statement{
				model.RoleWorker: {{Statement: map[string]any{"Effect": "Allow", "Action": []any{"ec2:AssignPrivateIpAddresses"}, "Resource": "*"}}},
			},
		},
		Kubernetes: &model.Kubernetes{
			Objects: []model.Object{
				{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "cni"}}},
				{Object: map[string]any{
					"apiVersion": "apps/v1", "kind": "DaemonSet",
					"metadata": map[string]any{"name": "cni", "namespace": "cni"},
					"spec": map[string]any{
						"selector": map[string]any{"matchLabels": map[string]any{"app": "cni"}},
						"template": map[string]any{
							"metadata": map[string]any{"labels": map[string]any{"app": "cni"}},
							"spec":     map[string]any{"containers": []any{map[string]any{"name": "cni", "image": "example.com/cni:1.0"}}},
						},
					},
				}},
			},
		},
	})
	add("dex", &model.Contribution{
		ControlPlane: &model.ControlPlane{
			Components: map[string]*model.Component{
				model.KubeAPIServer: {
					Flags: map[string]model.Setting[string]{
						"oidc-issuer-url": {Value: "https://dex.example.com"},
						"oidc-client-id":  {Value: "kubernetes"},
						"feature-gates":   {Value: "StructuredAuthenticationConfiguration=true"},
					},
					Volumes: map[string]model.Volume{
						"dex-ca": {HostPath: "/etc/kubeplug/dex", MountPath: "/etc/dex", ReadOnly: true},
					},
				},
			},
			FeatureGates: map[string]model.Setting[bool]{"WatchList": {Value: true}, "InPlacePodVerticalScaling": {Value: false}},
		},
		Pools: map[string]*model.Pool{
			model.ControlPlanePool: {
				Files: map[string]model.File{
					"/etc/kubeplug/dex/ca.crt": {Content: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", Mode: "0644"},
				},
				Kubelet: model.Kubelet{FeatureGates: map[string]model.Setting[bool]{"KubeletTracing": {Value: true}}},
			},
			"gpu-nodes": {
				Kubelet: model.Kubelet{
					Labels: map[string]model.Setting[string]{"kubeplug.dev/gpu": {Value: "true"}, "accelerator": {Value: "nvidia"}},
					Taints: []model.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}, {Key: "accelerator", Effect: "PreferNoSchedule"}},
				},
				Hooks: []model.Hook{
					{Name: "driver", At: render.PhaseAfterNodeup, Script: "#!/bin/sh\necho 'loading the driver'\n", Command: []string{"/bin/sh", "/var/lib/kubeplug/hooks/dex/driver", "--quiet"}, Behavior: "sync-bypass", Timeout: "5m"},
				},
			},
		},
		Cloud: &model.Cloud{
			Resources: map[string]model.Setting[any]{
				"DexCertificate": {Value: map[string]any{"Type": "AWS::CertificateManager::Certificate", "Properties": map[string]any{"DomainName": "dex.example.com"}}},
			},
			Outputs: map[string]model.Setting[any]{
				"DexCertificateArn": {Value: map[string]any{"Value": map[string]any{"Ref": "DexCertificate"}}},
			},
			IAM: map[string][]model.Statement{
				model.RoleControlPlane: {{Statement: map[string]any{"Effect": "Allow", "Action": []any{"acm:DescribeCertificate"}, "Resource": map[string]any{"Ref": "DexCertificate"}}}},
			},
		},
		Kubernetes: &model.Kubernetes{
			HelmReleases: []model.HelmRelease{{Name: "dex", Namespace: "dex", Chart: "charts/dex", Values: map[string]any{"replicas": 2, "issuer": "https://dex.example.com"}}},
		},
	})
	add("monitoring", &model.Contribution{
		Pools: map[string]*model.Pool{
			"workers": {Kubelet: model.Kubelet{Taints: []model.Taint{{Key: "dedicated", Value: "monitoring", Effect: "NoExecute"}}}},
		},
		Cloud: &model.Cloud{
			IAM: map[string][]model.Statement{
				model.RoleWorker: {{Statement: map[string]any{"Effect": "Allow", "Action": []any{"cloudwatch:PutMetricData"}, "Resource": "*"}}},
			},
			Pools: []model.PoolPart{{Role: model.RoleWorker, IAM: map[string]any{
				"MonitoringLogs": map[string]any{"Effect": "Allow", "Action": "logs:PutLogEvents", "Resource": "*"},
			}}},
			Patches: []model.Patch{{Ops: []model.PatchOp{
				{Op: "replace", Path: "/Resources/WorkersNodeGroup/Properties/MaxSize", Value: "6"},
			}}},
		},
		Kubernetes: &model.Kubernetes{
			Objects: []model.Object{{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "scrape", "namespace": "monitoring"},
				"data":     map[string]any{"targets.yaml": "- cni\n- dex\n"},
			}}},
			Patches: []model.ObjectPatch{
				{Target: model.ObjectRef{Kind: "DaemonSet", Namespace: "cni", Name: "cni"}, Ops: []model.PatchOp{
					{Op: "add", Path: "/spec/template/metadata/annotations", Value: map[string]any{"prometheus.io/scrape": "true"}},
				}},
				{Target: model.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "dex"}, Ops: []model.PatchOp{
					{Op: "add", Path: "/metadata/labels/monitored", Value: "yes"},
				}},
			},
		},
	})
	return render.Input{
		ClusterName:       "demo",
		KubernetesVersion: "1.37.2",
		Model:             m,
		Cloud:             aws.Template{},
		Charts: func(plugin string) fs.FS {
			if plugin == "dex" {
				return dexPackage
			}
			return nil
		},
		Order: []string{"cni", "dex", "monitoring"},
		Plan:  map[string]any{"cluster": "demo", "plugins": []any{"cni", "dex", "monitoring"}},
	}
}

// dexPackage is the dex plugin's package, with a chart that uses helpers, NOTES.txt,
// a CRD, a hook, a test hook and a .helmignore'd file.
var dexPackage = fstest.MapFS{
	"plugin.yaml":                       {Data: []byte("kind: Plugin\n")},
	"charts/dex/Chart.yaml":             {Data: []byte("apiVersion: v2\nname: dex\nversion: 0.1.0\nappVersion: \"2.41.1\"\nkubeVersion: \">=1.30.0-0\"\n")},
	"charts/dex/values.yaml":            {Data: []byte("replicas: 1\nissuer: https://example.com\nimage: ghcr.io/dexidp/dex\n")},
	"charts/dex/.helmignore":            {Data: []byte("*.md\n")},
	"charts/dex/README.md":              {Data: []byte("{{ this would not parse }}\n")},
	"charts/dex/crds/connector.yaml":    {Data: []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: connectors.dex.coreos.com\nspec:\n  group: dex.coreos.com\n  names: {kind: Connector, plural: connectors}\n  scope: Namespaced\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]\n")},
	"charts/dex/templates/_helpers.tpl": {Data: []byte("{{- define \"dex.labels\" -}}\napp.kubernetes.io/name: dex\napp.kubernetes.io/instance: {{ .Release.Name }}\n{{- end }}\n")},
	"charts/dex/templates/NOTES.txt":    {Data: []byte("Dex is at {{ .Values.issuer }}\n")},
	"charts/dex/templates/deployment.yaml": {Data: []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "dex.labels" . | nindent 4 }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels:
      {{- include "dex.labels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "dex.labels" . | nindent 8 }}
    spec:
      containers:
        - name: dex
          image: {{ .Values.image }}:{{ .Chart.AppVersion }}
          args: [dex, serve, --issuer={{ .Values.issuer }}, --kube-version={{ .Capabilities.KubeVersion.Version }}]
`)},
	"charts/dex/templates/service.yaml": {Data: []byte(`apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
spec:
  selector:
    {{- include "dex.labels" . | nindent 4 }}
  ports:
    - port: 5556
`)},
	"charts/dex/templates/migrate-job.yaml": {Data: []byte(`apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: migrate
          image: {{ .Values.image }}:{{ .Chart.AppVersion }}
`)},
	"charts/dex/templates/rbac.yaml": {Data: []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .Release.Name }}
rules:
  - apiGroups: [dex.coreos.com]
    resources: ["*"]
    verbs: ["*"]
---
apiVersion: dex.coreos.com/v1
kind: Connector
metadata:
  name: github
`)},
	"charts/dex/templates/tests/test-connection.yaml": {Data: []byte(`apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-test
  annotations:
    helm.sh/hook: test
spec:
  containers:
    - name: wget
      image: busybox
`)},
}
