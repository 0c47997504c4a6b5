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
