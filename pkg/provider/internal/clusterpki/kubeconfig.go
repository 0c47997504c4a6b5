package clusterpki

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteAdminKubeconfig writes a self-contained cluster-admin kubeconfig for
// the API server at server (the CA and the admin certificate of pkiDir
// embedded, its context named context) to each of paths, and returns it.
func WriteAdminKubeconfig(pkiDir, server, context string, paths ...string) (*clientcmdapi.Config, error) {
	p := pki{dir: pkiDir}
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(p.path(name))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		return b, nil
	}
	ca, err := read(CACert)
	if err != nil {
		return nil, err
	}
	cert, err := read(AdminCert)
	if err != nil {
		return nil, err
	}
	key, err := read(AdminKey)
	if err != nil {
		return nil, err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[context] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[context] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[context] = &clientcmdapi.Context{Cluster: context, AuthInfo: context}
	cfg.CurrentContext = context
	for _, path := range paths {
		if path == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("write kubeconfig %s: %w", path, err)
		}
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			return nil, fmt.Errorf("write kubeconfig %s: %w", path, err)
		}
	}
	return cfg, nil
}
