package action

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ContextName is the kubeconfig context, cluster and user name kubeplug gives a
// local cluster in the user's kubeconfig.
func ContextName(cluster string) string { return "kubeplug-" + cluster }

// MergeKubeconfig adds the cluster of the kubeconfig file at path to the user's
// kubeconfig ($KUBECONFIG, else ~/.kube/config) as context kubeplug-NAME and makes
// it the current context, as kind and minikube do. Entries of that name are
// replaced; nothing else changes.
func MergeKubeconfig(path, cluster string) (string, error) {
	src, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return "", fmt.Errorf("read the cluster's kubeconfig: %w", err)
	}
	cur := src.Contexts[src.CurrentContext]
	if cur == nil {
		return "", fmt.Errorf("the cluster's kubeconfig %s has no current context", path)
	}
	access := clientcmd.NewDefaultPathOptions()
	dst, err := access.GetStartingConfig()
	if err != nil {
		return "", fmt.Errorf("read your kubeconfig: %w", err)
	}
	c := src.Clusters[cur.Cluster].DeepCopy()
	u := src.AuthInfos[cur.AuthInfo].DeepCopy()
	if c == nil || u == nil {
		return "", fmt.Errorf("the cluster's kubeconfig %s is incomplete", path)
	}
	// Inline the credentials: the user's kubeconfig may live far from the state dir.
	if err := clientcmdapi.FlattenConfig(&clientcmdapi.Config{Clusters: map[string]*clientcmdapi.Cluster{"c": c}, AuthInfos: map[string]*clientcmdapi.AuthInfo{"c": u}}); err != nil {
		return "", fmt.Errorf("inline the cluster's credentials: %w", err)
	}
	// kubeplug-NAME, unless another cluster of the same name (its own CA: another
	// state directory) has it; then kubeplug-NAME-<CA digest>.
	name := ContextName(cluster)
	if have := dst.Clusters[name]; have != nil && !bytes.Equal(have.CertificateAuthorityData, c.CertificateAuthorityData) {
		name += "-" + caID(c.CertificateAuthorityData)
	}
	// Written where the user's kubeconfig is, not back into the cluster's own file.
	c.LocationOfOrigin, u.LocationOfOrigin = "", ""
	dst.Clusters[name] = c
	dst.AuthInfos[name] = u
	dst.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	dst.CurrentContext = name
	if err := clientcmd.ModifyConfig(access, *dst, true); err != nil {
		return "", fmt.Errorf("write your kubeconfig: %w", err)
	}
	return name, nil
}

// UnmergeKubeconfig removes what MergeKubeconfig added for the cluster whose CA
// is ca (kubeplug-NAME or kubeplug-NAME-<CA digest>), and the current context
// when it was one of them. Entries of another cluster of the same name (another
// CA) stay, and with no CA known nothing is removed. It is not an error when
// nothing is there.
func UnmergeKubeconfig(cluster string, ca []byte) error {
	if len(ca) == 0 {
		return nil
	}
	access := clientcmd.NewDefaultPathOptions()
	dst, err := access.GetStartingConfig()
	if err != nil {
		return fmt.Errorf("read your kubeconfig: %w", err)
	}
	changed := false
	for _, name := range []string{ContextName(cluster), ContextName(cluster) + "-" + caID(ca)} {
		c := dst.Clusters[name]
		if c == nil || !bytes.Equal(c.CertificateAuthorityData, ca) {
			continue
		}
		delete(dst.Contexts, name)
		delete(dst.Clusters, name)
		delete(dst.AuthInfos, name)
		if dst.CurrentContext == name {
			dst.CurrentContext = ""
		}
		changed = true
	}
	if !changed {
		return nil
	}
	if err := clientcmd.ModifyConfig(access, *dst, true); err != nil {
		return fmt.Errorf("write your kubeconfig: %w", err)
	}
	return nil
}

// KubeconfigCA is the CA data of the current context's cluster in the
// kubeconfig at path (nil when it cannot be read): what identifies a local
// cluster's entries in the user's kubeconfig.
func KubeconfigCA(path string) []byte {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil
	}
	cur := cfg.Contexts[cfg.CurrentContext]
	if cur == nil || cfg.Clusters[cur.Cluster] == nil {
		return nil
	}
	c := cfg.Clusters[cur.Cluster].DeepCopy()
	_ = clientcmdapi.FlattenConfig(&clientcmdapi.Config{Clusters: map[string]*clientcmdapi.Cluster{"c": c}})
	return c.CertificateAuthorityData
}

// caID is a short digest of a CA, for context names.
func caID(ca []byte) string {
	sum := sha256.Sum256(ca)
	return hex.EncodeToString(sum[:3])
}
