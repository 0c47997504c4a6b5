package declarative_test

import (
	"testing"

	"github.com/kubeplug/kubeplug/pkg/runtime/declarative"
)

// TestContributionPtr: every model key a declarative contribution sets is found
// at its entry in plugin.yaml; a key the manifest does not set is not.
func TestContributionPtr(t *testing.T) {
	pkg := load(t, `spec:
  contributes:
    controlPlane:
      featureGates: {Foo: true}
      scheduler:
        flags: {v: "2"}
        volumes: [{name: cfg, hostPath: /a, mountPath: /b}]
    nodes:
      - roles: [control-plane]
        kubelet: {flags: {v: "1"}}
      - pools: [workers]
        files: [{path: /etc/x/../y.conf, content: y}]
        systemdUnits: [{name: u.service, content: u, dropIns: [{name: 10-a.conf, content: a}]}]
        hooks: [{name: h, at: beforeNodeup, run: {command: ["true"]}}]
        kubelet:
          labels: {node.example.com/tier: x}
          featureGates: {Bar: false}
          taints: [{key: k, value: v, effect: NoSchedule}]
          flags: {max-pods: "10"}
    cloud:
      resources: {Queue: {Type: AWS::SQS::Queue}}
      outputs: {QueueURL: {Value: x}}
`)
	for _, tc := range []struct{ key, want string }{
		{"controlPlane.featureGates.Foo", "/spec/contributes/controlPlane/featureGates/Foo"},
		{"controlPlane.kube-scheduler.flags.v", "/spec/contributes/controlPlane/scheduler/flags/v"},
		{"controlPlane.kube-scheduler.volumes.cfg", "/spec/contributes/controlPlane/scheduler/volumes/0"},
		{"nodes.control-plane.kubelet.flags.v", "/spec/contributes/nodes/0/kubelet/flags/v"},
		{"nodes.workers.kubelet.flags.max-pods", "/spec/contributes/nodes/1/kubelet/flags/max-pods"},
		{"nodes.workers.files./etc/y.conf", "/spec/contributes/nodes/1/files/0"},
		{"nodes.workers.units.u.service", "/spec/contributes/nodes/1/systemdUnits/0"},
		{"nodes.workers.units.u.service.dropIns.10-a.conf", "/spec/contributes/nodes/1/systemdUnits/0/dropIns/0"},
		{"nodes.workers.hooks.h", "/spec/contributes/nodes/1/hooks/0"},
		{"nodes.workers.kubelet.labels.node.example.com/tier", "/spec/contributes/nodes/1/kubelet/labels/node.example.com~1tier"},
		{"nodes.workers.kubelet.featureGates.Bar", "/spec/contributes/nodes/1/kubelet/featureGates/Bar"},
		{"nodes.workers.kubelet.taints.k:NoSchedule", "/spec/contributes/nodes/1/kubelet/taints/0"},
		{"cloud.resources.Queue", "/spec/contributes/cloud/resources/Queue"},
		{"cloud.outputs.QueueURL", "/spec/contributes/cloud/outputs/QueueURL"},
		{"controlPlane.kube-apiserver.flags.v", ""},
		{"controlPlane.kube-scheduler.flags.w", ""},
		{"nodes.workers.files./etc/z", ""},
		{"kubernetes.objects.v1/ConfigMap/default/x", ""},
		{"nodes", ""},
	} {
		got, ok := declarative.ContributionPtr(pkg, tc.key)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("ContributionPtr(%q) = %q, %v; want %q", tc.key, got, ok, tc.want)
		}
	}
	if _, ok := declarative.ContributionPtr(load(t, "spec: {}\n"), "controlPlane.featureGates.Foo"); ok {
		t.Errorf("a manifest without contributions located a key")
	}
}

// TestPatchPtr: a patch operation is found at its entry when the manifest's
// operation there is the one rendered (a templated path as rendered).
func TestPatchPtr(t *testing.T) {
	pkg := load(t, `spec:
  contributes:
    cloud:
      patches: [{op: add, path: /a, value: 1}, {op: remove, path: "/{{ .Values.p }}"}]
    kubernetes:
      patches:
        - {target: {kind: ConfigMap}, patch: [{op: remove, path: /data/x}]}
`)
	for _, tc := range []struct {
		layer    string
		k, j     int
		op, path string
		want     string
	}{
		{"cloud", 0, 0, "add", "/a", "/spec/contributes/cloud/patches/0"},
		{"cloud", 0, 1, "remove", "/rendered", "/spec/contributes/cloud/patches/1"},
		{"cloud", 0, -1, "", "", "/spec/contributes/cloud/patches"},
		{"cloud", 0, 0, "remove", "/a", ""},
		{"cloud", 0, 0, "add", "/b", ""},
		{"cloud", 1, 0, "add", "/a", ""},
		{"cloud", 0, 2, "add", "/a", ""},
		{"kubernetes", 0, 0, "remove", "/data/x", "/spec/contributes/kubernetes/patches/0/patch/0"},
		{"kubernetes", 0, -1, "", "", "/spec/contributes/kubernetes/patches/0"},
		{"kubernetes", 1, 0, "remove", "/data/x", ""},
	} {
		got, ok := declarative.PatchPtr(pkg, tc.layer, tc.k, tc.j, tc.op, tc.path)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("PatchPtr(%s, %d, %d, %s %s) = %q, %v; want %q", tc.layer, tc.k, tc.j, tc.op, tc.path, got, ok, tc.want)
		}
	}
}
