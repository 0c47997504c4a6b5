package action

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// PluginAccountNamespace holds the ServiceAccounts of plugin code.
const PluginAccountNamespace = "kubeplug-system"

// pluginTokenTTL is how long a plugin's token lives: a run's deploy and
// validate stages, with room; the API server may grant less.
const pluginTokenTTL = time.Hour

// pluginAccess is the engine's Access of a run: once the run reaches a cluster
// (r.live.rest, set by connect or provision), each plugin with code gets the
// ServiceAccount kubeplug-system/kubeplug-plugin-<name>, a ClusterRole
// kubeplug:plugin:<name> of its spec.runtime.rbac bound to it, and a kubeconfig
// with a token of that account, made once per run. A dry run, or a run that
// reached no cluster, gives none.
type pluginAccess struct {
	r *run

	mu    sync.Mutex
	cache map[string]string
}

var _ engine.Access = (*pluginAccess)(nil)

// Kubeconfig implements engine.Access.
func (a *pluginAccess) Kubeconfig(ctx context.Context, pkg *plugin.Package) (string, error) {
	rc := a.r.live.rest
	if rc == nil || a.r.live.dryRun {
		return "", nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if kc, ok := a.cache[pkg.Name]; ok {
		return kc, nil
	}
	kc, err := pluginKubeconfig(ctx, rc, pkg)
	if err != nil {
		return "", err
	}
	if a.cache == nil {
		a.cache = map[string]string{}
	}
	a.cache[pkg.Name] = kc
	return kc, nil
}

// pluginKubeconfig makes pkg's account, role and binding in the cluster at rc
// (server-side apply, so a changed spec.runtime.rbac replaces the rules) and
// returns a kubeconfig with a token of the account.
func pluginKubeconfig(ctx context.Context, rc *rest.Config, pkg *plugin.Package) (string, error) {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return "", err
	}
	name := "kubeplug-plugin-" + pkg.Name
	role := "kubeplug:plugin:" + pkg.Name
	labels := map[string]string{"app.kubernetes.io/managed-by": "kubeplug", "kubeplug.dev/plugin": pkg.Name}
	apply := metav1.ApplyOptions{FieldManager: "kubeplug", Force: true}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, PluginAccountNamespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: PluginAccountNamespace}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create namespace %s: %w", PluginAccountNamespace, err)
		}
	} else if err != nil {
		return "", fmt.Errorf("read namespace %s: %w", PluginAccountNamespace, err)
	}
	sa := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: PluginAccountNamespace, Labels: labels}}
	if _, err := cs.CoreV1().ServiceAccounts(PluginAccountNamespace).Patch(ctx, name, types.ApplyPatchType, encode(sa), apply.ToPatchOptions()); err != nil {
		return "", fmt.Errorf("apply ServiceAccount %s/%s: %w", PluginAccountNamespace, name, err)
	}
	cr := &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: role, Labels: labels}, Rules: []rbacv1.PolicyRule{}}
	for _, r := range pkg.Manifest.Spec.Runtime.RBAC {
		groups := r.APIGroups
		if len(groups) == 0 {
			groups = []string{""}
		}
		cr.Rules = append(cr.Rules, rbacv1.PolicyRule{APIGroups: groups, Resources: r.Resources, Verbs: r.Verbs, ResourceNames: r.ResourceNames})
	}
	if _, err := cs.RbacV1().ClusterRoles().Patch(ctx, role, types.ApplyPatchType, encode(cr), apply.ToPatchOptions()); err != nil {
		return "", fmt.Errorf("apply ClusterRole %s: %w", role, err)
	}
	crb := &rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: role, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: PluginAccountNamespace}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Patch(ctx, role, types.ApplyPatchType, encode(crb), apply.ToPatchOptions()); err != nil {
		return "", fmt.Errorf("apply ClusterRoleBinding %s: %w", role, err)
	}
	ttl := int64(pluginTokenTTL / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(PluginAccountNamespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request a token of ServiceAccount %s/%s: %w", PluginAccountNamespace, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server, cluster.CertificateAuthorityData, cluster.InsecureSkipTLSVerify, cluster.TLSServerName = rc.Host, rc.CAData, rc.Insecure, rc.ServerName
	cluster.CertificateAuthority = rc.CAFile
	user := clientcmdapi.NewAuthInfo()
	user.Token = tr.Status.Token
	kctx := clientcmdapi.NewContext()
	kctx.Cluster, kctx.AuthInfo, kctx.Namespace = "cluster", name, PluginAccountNamespace
	cfg.Clusters["cluster"], cfg.AuthInfos[name], cfg.Contexts[name], cfg.CurrentContext = cluster, user, kctx, name
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return "", fmt.Errorf("write the kubeconfig: %w", err)
	}
	return string(b), nil
}

// encode is an apply patch's body: the typed object as JSON, which cannot fail
// for these types (no channels, funcs or cyclic values).
func encode(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
