package hosts

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// diagnose logs what names the cause of a failed up at once: each Node's
// readiness, pressure conditions, taints and labels; every Pod with its node
// and phase; the events of the default and kube-system namespaces; and, over
// SSH, each host's kubelet.env, the kubelet's command line and the end of its
// journal.
// It reads what it can and logs what it cannot; it never fails the test.
func diagnose(t *testing.T, state string, addrs []string, keyFile, known string) {
	t.Helper()
	var b strings.Builder
	defer func() { t.Logf("diagnosis:\n%s", b.String()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(state, "kubeconfig"))
	if err == nil {
		cfg.Timeout = 20 * time.Second
		diagnoseAPI(ctx, &b, kubernetes.NewForConfigOrDie(cfg))
	} else {
		fmt.Fprintf(&b, "no kubeconfig: %v\n", err)
	}
	for _, a := range addrs {
		fmt.Fprintf(&b, "--- host %s\n%s", a, hostReport(a, keyFile, known))
	}
}

func diagnoseAPI(ctx context.Context, b *strings.Builder, client kubernetes.Interface) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(b, "nodes: %v\n", err)
	}
	if nodes != nil {
		for _, n := range nodes.Items {
			var held []string
			for _, c := range n.Status.Conditions {
				if c.Type != corev1.NodeReady && c.Status == corev1.ConditionTrue {
					held = append(held, string(c.Type)+": "+c.Message)
				}
			}
			fmt.Fprintf(b, "node %s ready=%t unschedulable=%t conditions=%v taints=%v labels=%v\n", n.Name, ready(&n), n.Spec.Unschedulable, held, n.Spec.Taints, n.Labels)
		}
	}
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(b, "pods: %v\n", err)
	}
	if pods != nil {
		for _, p := range pods.Items {
			fmt.Fprintf(b, "pod %s/%s node=%q phase=%s %s\n", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, podWhy(&p))
		}
	}
	for _, ns := range []string{"default", "kube-system"} {
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(b, "events %s: %v\n", ns, err)
			continue
		}
		sort.Slice(evs.Items, func(i, j int) bool { return evs.Items[i].LastTimestamp.Before(&evs.Items[j].LastTimestamp) })
		for _, e := range evs.Items {
			fmt.Fprintf(b, "event %s %s %s/%s %s: %s (x%d)\n", e.LastTimestamp.Format(time.TimeOnly), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message, e.Count)
		}
	}
}

// podWhy is a Pod's unmet conditions and its containers' waiting reasons.
func podWhy(p *corev1.Pod) string {
	var why []string
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			why = append(why, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			why = append(why, fmt.Sprintf("%s waiting %s: %s", c.Name, w.Reason, w.Message))
		}
	}
	return strings.Join(why, "; ")
}

// hostReport is what a host says of its kubelet and containerd over SSH.
func hostReport(addr, keyFile, known string) string {
	key, err := os.ReadFile(keyFile) //nolint:gosec // the test's key
	if err != nil {
		return err.Error() + "\n"
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		return err.Error() + "\n"
	}
	check, err := knownhosts.New(known)
	if err != nil {
		return err.Error() + "\n"
	}
	c, err := ssh.Dial("tcp", net.JoinHostPort(addr, "22"), &ssh.ClientConfig{
		User: sshUser, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: check, Timeout: 10 * time.Second})
	if err != nil {
		return err.Error() + "\n"
	}
	defer func() { _ = c.Close() }()
	s, err := c.NewSession()
	if err != nil {
		return err.Error() + "\n"
	}
	defer func() { _ = s.Close() }()
	out, err := s.CombinedOutput("sudo sh -c 'cat /etc/kubeplug/kubelet.env; pgrep -a kubelet; journalctl --no-pager -n 40 -u kubelet.service; journalctl --no-pager -n 20 -u containerd.service' 2>&1")
	if err != nil {
		return fmt.Sprintf("%s%v\n", out, err)
	}
	return string(out)
}
