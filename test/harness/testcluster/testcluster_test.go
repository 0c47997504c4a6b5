package testcluster

import (
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

func TestNamespace(t *testing.T) {
	var name string
	t.Run("creates", func(t *testing.T) {
		name = Namespace(t)
		ns, err := Client(t).CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get namespace %s: %v", name, err)
		}
		if ns.Labels["kubeplug.dev/test"] != "true" {
			t.Errorf("namespace %s labels = %v", name, ns.Labels)
		}
	})
	// The subtest's cleanup has run: the namespace is gone or terminating.
	ns, err := Client(t).CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
	if err == nil && ns.DeletionTimestamp == nil {
		t.Errorf("namespace %s still active after its test ended", name)
	}
}

func TestSharedClusterHasReadyNodes(t *testing.T) {
	nodes, err := Client(t).CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != DefaultNodes {
		t.Errorf("nodes = %d, want %d", len(nodes.Items), DefaultNodes)
	}
}

func TestNamespacePrefix(t *testing.T) {
	tests := []struct{ in, want string }{
		{"TestApply", "testapply-"},
		{"TestApply/with_CRDs#01", "testapply-with-crds-01-"},
		{"///", "test-"},
		{"TestAVeryLongNameThatGoesOnAndOnAndOnBeyondTheDNSLabelLimit/sub", "testaverylongnamethatgoesonandonandonbeyondthednsl-"},
	}
	for _, tt := range tests {
		if got := namespacePrefix(tt.in); got != tt.want {
			t.Errorf("namespacePrefix(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
