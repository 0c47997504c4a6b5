package cmd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestStoreToken: the token is stored, with its RBAC, once an API server that
// refused the first calls answers; a token file that is missing is named.
func TestStoreToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bootstrap-token")
	if err := os.WriteFile(file, []byte("abcdef.0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	refused := 0
	client.PrependReactor("create", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refused < 2 {
			refused++
			return true, nil, errors.New("connect: connection refused")
		}
		return false, nil, nil
	})
	opts := storeTokenOptions{Client: client, TokenFile: file, Group: "system:bootstrappers:kubeplug:aws", Owner: "aws", Wait: time.Minute, Interval: 10 * time.Millisecond}
	if err := storeToken(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	s, err := client.CoreV1().Secrets("kube-system").Get(t.Context(), "bootstrap-token-abcdef", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.StringData["token-secret"] != "0123456789abcdef" || s.StringData["auth-extra-groups"] != opts.Group {
		t.Errorf("secret %v", s.StringData)
	}
	for _, name := range []string{"kubeplug:aws:bootstrapper", "kubeplug:aws:approve-node-client", "kubeplug:aws:renew-node-client"} {
		if _, err := client.RbacV1().ClusterRoleBindings().Get(t.Context(), name, metav1.GetOptions{}); err != nil {
			t.Error(err)
		}
	}
	// Again: what is there is kept.
	if err := storeToken(t.Context(), opts); err != nil {
		t.Fatal(err)
	}

	opts.TokenFile, opts.Wait = filepath.Join(t.TempDir(), "none"), 0
	if err := storeToken(t.Context(), opts); err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("missing token file: %v", err)
	}
}
