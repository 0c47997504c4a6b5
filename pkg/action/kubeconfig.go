package action

import (
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
	name := ContextName(cluster)
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
	if err := clientcmdapi.FlattenConfig(&clientcmdapi.Config{Clusters: map[string]*clientcmdapi.Cluster{name: c}, AuthInfos: map[string]*clientcmdapi.AuthInfo{name: u}}); err != nil {
		return "", fmt.Errorf("inline the cluster's credentials: %w", err)
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

// UnmergeKubeconfig removes what MergeKubeconfig added for the cluster, and the
// current context when it was the cluster's. It is not an error when nothing is there.
func UnmergeKubeconfig(cluster string) error {
	name := ContextName(cluster)
	access := clientcmd.NewDefaultPathOptions()
	dst, err := access.GetStartingConfig()
	if err != nil {
		return fmt.Errorf("read your kubeconfig: %w", err)
	}
	if dst.Contexts[name] == nil && dst.Clusters[name] == nil && dst.AuthInfos[name] == nil {
		return nil
	}
	delete(dst.Contexts, name)
	delete(dst.Clusters, name)
	delete(dst.AuthInfos, name)
	if dst.CurrentContext == name {
		dst.CurrentContext = ""
	}
	if err := clientcmd.ModifyConfig(access, *dst, true); err != nil {
		return fmt.Errorf("write your kubeconfig: %w", err)
	}
	return nil
}
