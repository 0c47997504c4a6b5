package hosts

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

func TestTimeouts(t *testing.T) {
	spec := &v1alpha1.HostsProvider{SSH: &v1alpha1.HostSSH{Agent: true}, Pools: []v1alpha1.HostPool{{Name: "control-plane", Hosts: []v1alpha1.Host{{Address: "192.0.2.10"}}}},
		Timeouts: &v1alpha1.HostTimeouts{Connect: "3s", Drain: "45s"}}
	p, err := New(Options{ClusterName: "c", StateDir: t.TempDir(), Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	want := timeouts{connect: 3 * time.Second, command: defaultTimeouts.command, ready: defaultTimeouts.ready, drain: 45 * time.Second}
	if p.timeouts != want || p.hosts[0].connectTimeout() != 3*time.Second || p.hosts[0].commandTimeout() != defaultTimeouts.command {
		t.Errorf("timeouts = %+v (host: connect %s), want %+v", p.timeouts, p.hosts[0].connectTimeout(), want)
	}
	spec.Timeouts = &v1alpha1.HostTimeouts{Command: "0s", Ready: "ten minutes"}
	_, err = New(Options{ClusterName: "c", StateDir: t.TempDir(), Spec: spec})
	for _, w := range []string{`spec.provider.hosts.timeouts.command: "0s" is not a positive duration`, `spec.provider.hosts.timeouts.ready: "ten minutes" is not a positive duration`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("err = %v, want %q", err, w)
		}
	}
}

// TestKeySecretRef: without a management cluster the provider refuses a
// keySecretRef naming its field; with one it reads the key from the Secret,
// and a missing key is named.
func TestKeySecretRef(t *testing.T) {
	keyFile, _ := clientKey(t)
	key, err := os.ReadFile(keyFile) //nolint:gosec // the test's key
	if err != nil {
		t.Fatal(err)
	}
	ref := &v1alpha1.SecretKeyRef{Namespace: "ops", Name: "ssh", Key: "id"}
	spec := &v1alpha1.HostsProvider{Pools: []v1alpha1.HostPool{{Name: "control-plane", Hosts: []v1alpha1.Host{{Address: "192.0.2.10", SSH: &v1alpha1.HostSSH{KeySecretRef: ref}}}}}}
	_, err = New(Options{ClusterName: "c", StateDir: t.TempDir(), Spec: spec})
	if err == nil || !strings.Contains(err.Error(), "spec.provider.hosts.pools[0].hosts[0].ssh.keySecretRef: the key is in a Secret of a management cluster") {
		t.Fatalf("without a management cluster: %v", err)
	}
	kc := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "ssh"}, Data: map[string][]byte{"id": key}})
	p, err := New(Options{ClusterName: "c", StateDir: t.TempDir(), Spec: spec, Management: kc})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.secretKeys(context.Background(), p.hosts); err != nil {
		t.Fatal(err)
	}
	methods, closeFn, err := auth(p.hosts[0])
	defer closeFn()
	if err != nil || len(methods) != 1 {
		t.Errorf("auth with the Secret's key: %d methods, %v", len(methods), err)
	}
	ref.Key = "other"
	p, _ = New(Options{ClusterName: "c", StateDir: t.TempDir(), Spec: spec, Management: kc})
	if err := p.secretKeys(context.Background(), p.hosts); err == nil || !strings.Contains(err.Error(), `Secret ops/ssh has no key "other"`) {
		t.Errorf("a missing key: %v", err)
	}
}
