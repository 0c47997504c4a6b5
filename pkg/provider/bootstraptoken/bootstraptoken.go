// Package bootstraptoken makes and stores the bootstrap tokens machines join
// with (kubeadm's bootstrap-token Secrets and RBAC), for every provider that
// joins machines and for the node agent's store-token step.
package bootstraptoken

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// New is a new bootstrap token, "<id>.<secret>" (6 and 16
// characters of [a-z0-9]); Store makes it valid.
func New() (string, error) {
	id, err := randomToken(6)
	if err != nil {
		return "", err
	}
	secret, err := randomToken(16)
	if err != nil {
		return "", err
	}
	return id + "." + secret, nil
}

// Token is a bootstrap token to store, and for whom.
type Token struct {
	// Token is "<id>.<secret>".
	Token string
	// Group is the extra group its kubelets authenticate in; the RBAC binds it.
	Group string
	// Owner names the ClusterRoleBindings ("kubeplug:OWNER:bootstrapper", …)
	// and the Secret's description: "machines", "hosts".
	Owner string
	// TTL is how long it serves a kubelet's first TLS bootstrap; renewals use
	// the node's own certificate.
	TTL time.Duration
}

// Store stores t as a bootstrap token Secret (kept when one
// is there), with the RBAC that lets its kubelets get client certificates
// and the nodes renew theirs approved, as kubeadm does.
func Store(ctx context.Context, client kubernetes.Interface, t Token) error {
	id, secret, ok := strings.Cut(t.Token, ".")
	if !ok {
		return errors.New("bootstrap token: not <id>.<secret>")
	}
	bind := func(name, role string, subject rbacv1.Subject) rbacv1.ClusterRoleBinding {
		return rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubeplug:" + t.Owner + ":" + name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{subject}}
	}
	group := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: t.Group}
	nodes := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:nodes"}
	for _, b := range []rbacv1.ClusterRoleBinding{
		bind("bootstrapper", "system:node-bootstrapper", group),
		bind("approve-node-client", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", group),
		bind("renew-node-client", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", nodes),
	} {
		if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("bootstrap: ClusterRoleBinding %s: %w", b.Name, err)
		}
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id": id, "token-secret": secret,
			"expiration":                     time.Now().Add(t.TTL).UTC().Format(time.RFC3339),
			"usage-bootstrap-authentication": "true",
			"auth-extra-groups":              t.Group,
			"description":                    "kubeplug: the " + t.Owner + " join with it",
		},
	}
	if _, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	return nil
}

// randomToken is n characters of [a-z0-9], a bootstrap token's alphabet.
func randomToken(n int) (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b), nil
}
