package aws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/nodeagent"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/bootstraptoken"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/clusterpki"
	"github.com/kubeplug/kubeplug/pkg/render"
	"github.com/kubeplug/kubeplug/pkg/s3lite"
	"github.com/kubeplug/kubeplug/pkg/serving"
)

// The boot secrets: the provider's part of a machine's boot (docs/machines.md),
// delivered as a cloud machine fetches it, with its own identity. Up makes the
// cluster's CA and keys and a bootstrap token in the state directory (0600,
// never in rendered output or user data), and once the stacks are deployed
// (the API server's load balancer has its name, the KMS key its ARN) uploads
// per pool one object, s3://<bucket>/<stackPrefix>/boot/<pool>/boot-secrets.json,
// encrypted with SSE-KMS under the core stack's key. Only the pool's role may
// read it (template_boot.go). The rendered user data runs `kubeplug node
// fetch-secrets` before the boot, which writes its files (nodeagent.BootSecrets).

// tlsServerName is the name the machines and the cluster-admin kubeconfig
// check the API server's certificate for. The certificate is made before the
// load balancer (and so its DNS name) exists; it names "kubernetes", and the
// kubeconfigs reach the load balancer's name with tls-server-name.
const tlsServerName = "kubernetes"

// cpNodeName is the control-plane machine's node name. There is one (more
// are refused), so its kubelet gets a client certificate of its own up front,
// as kubeadm's control-plane node does: no API server could answer a TLS
// bootstrap before this kubelet started it.
const cpNodeName = model.ControlPlanePool + "-0"

// bootstrapGroup is the group the workers' bootstrap token authenticates in.
const bootstrapGroup = "system:bootstrappers:kubeplug:aws"

// The control-plane machine stores the workers' bootstrap token (made up
// front, in their boot secrets) as its first act once its API server
// answers: a unit of its boot secrets, started by the fetch step.
const (
	tokenFile             = "/etc/kubeplug/bootstrap-token"
	storeTokenUnit        = "kubeplug-bootstrap-token.service"
	storeTokenUnitContent = `[Unit]
Description=kubeplug: store the workers' bootstrap token once the API server answers
[Service]
Type=oneshot
ExecStart=` + render.AgentPath + ` node store-token --kubeconfig ` + factKubeconfig + ` --token-file ` + tokenFile + ` --group ` + bootstrapGroup + ` --owner aws --ttl 24h --wait 30m
Restart=on-failure
RestartSec=10
StandardOutput=journal+console
StandardError=journal+console
`
)

// prefixOf is the stack prefix of spec (Options.StackPrefix's default).
func prefixOf(clusterName string, a *v1alpha1.AWSProvider) string {
	if a != nil && a.StackPrefix != "" {
		return a.StackPrefix
	}
	return "kubeplug-" + clusterName
}

// bootSecretsURL is render's Input.BootSecrets on aws: where the machines of
// pool fetch their boot secrets; "" without a bucket (render still shows the
// machines, up refuses the cluster).
func bootSecretsURL(clusterName string, spec *v1alpha1.Provider, pool string) string {
	if spec == nil || spec.AWS == nil || spec.AWS.Bucket == "" {
		return ""
	}
	return "s3://" + spec.AWS.Bucket + "/" + BootSecretsKey(prefixOf(clusterName, spec.AWS), pool)
}

// bootSecrets makes the boot secrets of every pool of d for the API server at
// endpoint (the core stack's APIServerEndpoint): the PKI and the token are
// made once, in the state directory, and kept.
func (p *Provider) bootSecrets(d *provider.Desired, endpoint string) (map[string]*nodeagent.BootSecrets, error) {
	cp := d.Model.ControlPlane.Components
	flag := func(comp, name string) string {
		if c := cp[comp]; c != nil {
			return c.Flags[name].Value
		}
		return ""
	}
	serviceCIDR := flag(model.KubeAPIServer, "service-cluster-ip-range")
	_, svc, err := net.ParseCIDR(serviceCIDR)
	if err != nil || svc.IP.To4() == nil {
		return nil, fmt.Errorf("boot secrets: the API server's service-cluster-ip-range %q: expected an IPv4 range", serviceCIDR)
	}
	nth := func(n byte) net.IP { ip := slices4(svc.IP); ip[3] += n; return ip }
	pki := filepath.Join(p.stateDir, "pki")
	if err := clusterpki.EnsurePKI(pki, nth(1)); err != nil {
		return nil, fmt.Errorf("boot secrets: %w", err)
	}
	token, err := p.bootstrapToken()
	if err != nil {
		return nil, err
	}
	ca, err := bounded.ReadFile(clusterpki.CACertPath(pki), 1<<20)
	if err != nil {
		return nil, err
	}
	keyPairs, err := p.keyPairs(pki, ca, d.Model)
	if err != nil {
		return nil, err
	}
	kubelet := kubeletConfig(nth(10).String())
	out := map[string]*nodeagent.BootSecrets{}
	for _, name := range d.Model.PoolNames() {
		bs := &nodeagent.BootSecrets{}
		add := func(path, mode string, content []byte) {
			bs.Files = append(bs.Files, nodeagent.SecretFile{Path: path, Mode: mode, Content: content})
		}
		for _, f := range keyPairs[name] {
			add(f.Path, f.Mode, f.Content)
		}
		if d.Model.Pools[name].Role == model.RoleControlPlane {
			if err := p.controlPlaneSecrets(pki, add); err != nil {
				return nil, err
			}
			add(render.KubeletConfigPath, "0644", []byte(kubelet+"staticPodPath: "+render.StaticPodDir+"\n"))
			add(render.KubeletProviderEnvPath, "0644", []byte("KUBELET_PROVIDER_ARGS=--hostname-override="+cpNodeName+"\n"))
			add(tokenFile, "0600", []byte(token+"\n"))
			add(path.Join("/etc/systemd/system", storeTokenUnit), "0644", []byte(storeTokenUnitContent))
			bs.Units = []string{storeTokenUnit}
			out[name] = bs
			continue
		}
		add(clusterpki.CACertPath(factPKIDir), "0644", ca)
		add(render.KubeletConfigPath, "0644", []byte(kubelet))
		boot, err := kubeconfig(endpoint, ca, &clientcmdapi.AuthInfo{Token: token})
		if err != nil {
			return nil, err
		}
		add(render.KubeletBootstrapKubeconfigPath, "0600", boot)
		cert, key, err := issue(pki, p.stateDir, "kube-proxy", "system:kube-proxy")
		if err != nil {
			return nil, err
		}
		proxy, err := kubeconfig(endpoint, ca, &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key})
		if err != nil {
			return nil, err
		}
		add("/var/lib/kube-proxy/kubeconfig", "0600", proxy)
		add("/var/lib/kube-proxy/config.yaml", "0644", []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: iptables\nclusterCIDR: \""+
			flag(model.KubeControllerManager, "cluster-cidr")+"\"\nclientConnection: {kubeconfig: /var/lib/kube-proxy/kubeconfig}\n"))
		out[name] = bs
	}
	return out, nil
}

// keyPairs issues (or keeps) the plugins' key pairs in the state directory,
// those of the cluster signed by its CA (certificate ca, key in pki), and
// returns each pool's files: they travel in the pool's boot secrets, as the
// cluster's PKI does, sealed with the core stack's KMS key and readable only
// by the pool's role.
func (p *Provider) keyPairs(pki string, ca []byte, m *model.Model) (map[string][]provider.KeyPairFile, error) {
	if len(m.KeyPairs) == 0 {
		return nil, nil
	}
	key, err := bounded.ReadFile(clusterpki.CAKeyPath(pki), 1<<20)
	if err != nil {
		return nil, fmt.Errorf("boot secrets: %w", err)
	}
	files, err := provider.IssueKeyPairs(p.stateDir, serving.KeyPairCA{CertPEM: ca, KeyPEM: key}, m.KeyPairs, serving.DefaultPolicy())
	if err != nil {
		return nil, fmt.Errorf("boot secrets: %w", err)
	}
	return files, nil
}

// controlPlaneSecrets are the control-plane machine's: the PKI, the
// components' kubeconfig and the kubelet's own, both for the API server on
// the machine itself (a machine does not reach itself through its network
// load balancer).
func (p *Provider) controlPlaneSecrets(pki string, add func(path, mode string, content []byte)) error {
	entries, err := os.ReadDir(pki)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		b, err := bounded.ReadFile(filepath.Join(pki, e.Name()), 1<<20)
		if err != nil {
			return err
		}
		mode := "0644"
		if strings.HasSuffix(e.Name(), ".key") {
			mode = "0600"
		}
		add(path.Join(factPKIDir, e.Name()), mode, b)
	}
	local := "https://" + net.JoinHostPort(factLocal, fmt.Sprint(apiServerPort))
	admin, err := clusterpki.WriteAdminKubeconfig(pki, local, "kubernetes-admin")
	if err != nil {
		return err
	}
	b, err := clientcmd.Write(*admin)
	if err != nil {
		return err
	}
	add(factKubeconfig, "0600", b)
	cert, key, err := issue(pki, p.stateDir, "kubelet-"+cpNodeName, "system:node:"+cpNodeName, "system:nodes")
	if err != nil {
		return err
	}
	ca, err := bounded.ReadFile(clusterpki.CACertPath(pki), 1<<20)
	if err != nil {
		return err
	}
	b, err = kubeconfig(local, ca, &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key})
	if err != nil {
		return err
	}
	add(render.KubeletKubeconfigPath, "0600", b)
	return nil
}

// issue makes (once, kept in the state directory's node-pki) a client
// certificate of the cluster's CA and returns it and its key.
func issue(pki, stateDir, name, cn string, orgs ...string) (cert, key []byte, err error) {
	dir := filepath.Join(stateDir, "node-pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	cf, kf := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if _, err := os.Stat(kf); err != nil {
		if err := clusterpki.IssueClientCert(pki, cf, kf, cn, orgs...); err != nil {
			return nil, nil, fmt.Errorf("boot secrets: %s: %w", name, err)
		}
	}
	if cert, err = bounded.ReadFile(cf, 1<<20); err != nil {
		return nil, nil, err
	}
	key, err = bounded.ReadFile(kf, 1<<20)
	return cert, key, err
}

// kubeconfig is a kubeconfig for the API server at server, checking its
// certificate against ca for tlsServerName.
func kubeconfig(server string, ca []byte, user *clientcmdapi.AuthInfo) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubernetes"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca, TLSServerName: tlsServerName}
	cfg.AuthInfos["node"] = user
	cfg.Contexts["kubernetes"] = &clientcmdapi.Context{Cluster: "kubernetes", AuthInfo: "node"}
	cfg.CurrentContext = "kubernetes"
	return clientcmd.Write(*cfg)
}

// kubeletConfig is the kubelet's configuration on an aws machine: systemd's
// cgroups, webhook authentication and authorization, the cluster's DNS.
func kubeletConfig(clusterDNS string) string {
	return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ` + clusterpki.CACertPath(factPKIDir) + `}
authorization: {mode: Webhook}
clusterDNS: ["` + clusterDNS + `"]
rotateCertificates: true
`
}

// bootstrapToken is the workers' bootstrap token, made once and kept in the
// state directory (0600).
func (p *Provider) bootstrapToken() (string, error) {
	file := filepath.Join(p.stateDir, "bootstrap-token")
	if b, err := os.ReadFile(file); err == nil { //nolint:gosec // the provider's own state file
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	t, err := bootstraptoken.New()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(p.stateDir, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(file, []byte(t+"\n"), 0o600); err != nil {
		return "", err
	}
	return t, nil
}

func slices4(ip net.IP) net.IP { return append(net.IP(nil), ip.To4()...) }

// putBootSecrets uploads each pool's boot secrets to its object, encrypted
// with SSE-KMS under keyARN, and records the keys for Destroy. An object is
// replaced: the machines booting next fetch the new one.
func (d *Deployer) putBootSecrets(ctx context.Context, secrets map[string]*nodeagent.BootSecrets, keyARN string) error {
	st, err := ReadState(d.opts.StateFile)
	if err != nil {
		return err
	}
	for _, pool := range sortedKeys(secrets) {
		body, err := nodeagent.EncodeBootSecrets(secrets[pool])
		if err != nil {
			return err
		}
		key := BootSecretsKey(d.opts.StackPrefix, pool)
		uri := "s3://" + d.opts.Bucket + "/" + key
		_, err = call(ctx, d, "upload the boot secrets of pool "+pool+" to "+uri, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, d.c.s3.PutObject(ctx, s3lite.PutInput{
				Bucket: d.opts.Bucket, Key: key, Body: body, ContentType: "application/json",
				KMSKeyID: keyARN,
				Metadata: map[string]string{"kubeplug-cluster": d.opts.ClusterName, "kubeplug-pool": pool},
			})
		})
		if err != nil {
			return err
		}
		st.Objects = append(st.Objects, key)
		if err := st.write(d.opts.StateFile); err != nil {
			return err
		}
		d.event("boot-secrets", "", "%s: %d files, encrypted with %s", uri, len(secrets[pool].Files), keyARN)
	}
	return nil
}

// checkClear refuses a rendered node file that holds a plugin's sensitive
// value in clear: a pool's files are its user data, which whoever may
// describe the launch template reads, and the files are uploaded without
// encryption. Sealing such values is not built; the error says so, naming
// the file and the plugin, before anything changes.
func checkClear(d *provider.Desired) error {
	for _, file := range sortedKeys(d.Files) {
		if !strings.HasPrefix(file, "nodes/") {
			continue
		}
		for _, plugin := range sortedKeys(d.Sensitive) {
			for _, v := range d.Sensitive[plugin] {
				if v != "" && bytes.Contains(d.Files[file], []byte(v)) {
					return fmt.Errorf("%s holds a sensitive value of plugin %s in clear: on aws a pool's files are its user data, which whoever may describe its launch template reads, and sealing them is not built; keep sensitive values out of node files and hooks (docs/aws.md)", file, plugin)
				}
			}
		}
	}
	return nil
}
