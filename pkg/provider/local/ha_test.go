package local

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// Each control-plane machine of a stacked control plane runs the rendered
// static Pods with its own address, its etcd member's name, the cluster's
// membership and peer TLS, and leader election on.
func TestHAStaticPods(t *testing.T) {
	pod := func(name string, args ...string) render.MachineFile {
		b, err := yaml.Marshal(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Command: append([]string{name}, args...)}}}})
		if err != nil {
			t.Fatal(err)
		}
		return render.MachineFile{Path: render.StaticPodDir + "/" + name + ".yaml", Content: b}
	}
	m := &render.Machine{Files: []render.MachineFile{
		pod("etcd", "--name=kubeplug", "--listen-client-urls=http://10.250.3.2:2379", "--listen-peer-urls=http://10.250.3.2:2380", "--data-dir=/var/lib/etcd"),
		pod("kube-apiserver", "--advertise-address=10.250.3.2", "--etcd-servers=http://10.250.3.2:2379", "--service-cluster-ip-range=10.250.3.20/28"),
		pod("kube-controller-manager", "--bind-address=10.250.3.2", "--leader-elect=false"),
	}}
	network := realnode.Network{ID: "abc", Subnet: "10.250.3.0/24"}
	members := haMembers(network, 3)
	initial := initialCluster(members)
	if initial != "control-plane-0=https://10.250.3.2:2380,control-plane-1=https://10.250.3.3:2380,control-plane-2=https://10.250.3.4:2380" {
		t.Errorf("initial cluster: %s", initial)
	}
	files, err := haStaticPods(m, "10.250.3.2", members[1], network.ID, initial, "existing")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]corev1.Pod{}
	for _, f := range files {
		var p corev1.Pod
		if err := yaml.Unmarshal([]byte(f.content), &p); err != nil {
			t.Fatal(err)
		}
		got[p.Spec.Containers[0].Name] = p
	}
	cmd := func(name string) string { return strings.Join(got[name].Spec.Containers[0].Command, " ") }
	for _, want := range []string{"--name=control-plane-1", "--listen-client-urls=http://10.250.3.3:2379", "--listen-peer-urls=https://10.250.3.3:2380",
		"--initial-advertise-peer-urls=https://10.250.3.3:2380", "--initial-cluster=" + initial, "--initial-cluster-state=existing",
		"--initial-cluster-token=kubeplug-abc", "--peer-cert-file=/etc/kubernetes/pki/etcd/peer.crt", "--peer-client-cert-auth=true", "--data-dir=/var/lib/etcd"} {
		if !strings.Contains(cmd("etcd")+" ", want+" ") {
			t.Errorf("etcd's command lacks %s: %s", want, cmd("etcd"))
		}
	}
	if mounts := got["etcd"].Spec.Containers[0].VolumeMounts; len(mounts) != 1 || mounts[0].MountPath != "/etc/kubernetes/pki/etcd" || !mounts[0].ReadOnly {
		t.Errorf("etcd's mounts: %+v", mounts)
	}
	// The address is replaced whole: a longer one that starts with it is not.
	if c := cmd("kube-apiserver"); c != "kube-apiserver --advertise-address=10.250.3.3 --etcd-servers=http://10.250.3.3:2379 --service-cluster-ip-range=10.250.3.20/28" {
		t.Errorf("kube-apiserver: %s", c)
	}
	if c := cmd("kube-controller-manager"); c != "kube-controller-manager --bind-address=10.250.3.3 --leader-elect=true" {
		t.Errorf("kube-controller-manager: %s", c)
	}
}

// The load balancer checks each API server's /readyz and passes TCP through.
func TestLBUserData(t *testing.T) {
	ud := string(lbUserData(haMembers(realnode.Network{Subnet: "10.250.3.0/24"}, 3)))
	var cc map[string]any
	if err := yaml.Unmarshal([]byte(ud), &cc); err != nil {
		t.Fatalf("not YAML: %v\n%s", err, ud)
	}
	for _, want := range []string{"#cloud-config\n", "mode tcp", "bind *:6443", "option httpchk GET /readyz", "check-ssl verify none", "on-marked-down shutdown-sessions",
		"server control-plane-0 10.250.3.2:6443\n", "server control-plane-2 10.250.3.4:6443\n", "[systemctl, restart, haproxy.service]"} {
		if !strings.Contains(ud, want) {
			t.Errorf("load balancer user data lacks %q:\n%s", want, ud)
		}
	}
}
