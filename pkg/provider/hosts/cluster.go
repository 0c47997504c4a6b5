package hosts

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	yaml "go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/clusterpki"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/podnet"
	"github.com/kubeplug/kubeplug/pkg/provider/nodeimage"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// The control plane on its host runs as the static Pods `render` writes, with
// kubeadm's ports and paths: the provider's facts for the control-plane
// plugin name them, so what render shows is what runs.
const (
	apiServerPort         = 6443
	controllerManagerPort = 10257
	schedulerPort         = 10259
	etcdClientPort        = 2379
	etcdPeerPort          = 2380
	factPKIDir            = "/etc/kubernetes/pki"
	factKubeconfig        = "/etc/kubernetes/admin.conf"
)

// facts are the control-plane plugin's machine value for a control plane at ip.
func facts(ip string) map[string]any {
	return map[string]any{
		"address": ip,
		"ports": map[string]any{
			"apiServer":         apiServerPort,
			"controllerManager": controllerManagerPort,
			"scheduler":         schedulerPort,
		},
		"etcdServers": "http://" + net.JoinHostPort(ip, strconv.Itoa(etcdClientPort)),
		"etcd": map[string]any{
			"name": "kubeplug", "dataDir": "/var/lib/etcd",
			"clientPort": etcdClientPort, "peerPort": etcdPeerPort,
			"fsync": true,
		},
		"pkiDir":                   factPKIDir,
		"kubeconfig":               factKubeconfig,
		"perControllerCredentials": false,
	}
}

// Facts implements provider.FactSource: the control-plane host's.
func (p *Provider) Facts() (map[string]any, error) {
	cp := p.controlPlaneHost()
	if cp == nil {
		return nil, fmt.Errorf("%s.pools: no %s pool: name the host the control plane runs on", field, model.ControlPlanePool)
	}
	return facts(cp.Address), nil
}

func (p *Provider) controlPlaneHost() *Host {
	for _, h := range p.hosts {
		if h.Pool == model.ControlPlanePool {
			return h
		}
	}
	return nil
}

// registryAddr is where each host's own registry listens: loopback only; the
// provider pushes through the SSH connection, the host's containerd pulls
// every image through it.
const registryAddr = "127.0.0.1:5000"

// sandboxImage is the sandbox image the hosts' containerd names
// (files/containerd-config.toml).
const sandboxImage = "registry.k8s.io/pause:3.10"

const registryUnit = `# kubeplug's image registry of this host, on loopback only: containerd pulls
# every image through it (/etc/containerd/certs.d/_default/hosts.toml).
[Unit]
Description=kubeplug image registry
[Service]
ExecStart=/usr/local/bin/kubeplug-registry --listen ` + registryAddr + ` --dir /var/lib/kubeplug/registry
Restart=always
RestartSec=2
[Install]
WantedBy=multi-user.target
`

// cluster is what Up knows of the cluster it builds.
type cluster struct {
	stateDir, pkiDir string
	server           string // https://<control-plane host>:6443
	clusterCIDR      string
	serviceCIDR      string
	clusterDNS       string
	index            map[string]int // node name → ordinal (its Pod range)
	cpPods           []staticPod
	images           map[string][]image // by pool
	// site is the run's expansions' site, nil without (site.go).
	site *provider.Site
}

// image is an image a host's registry gets, under repo:tag.
type image struct {
	ref string
	img v1.Image
}

// staticPod is one of the control plane's rendered static Pods.
type staticPod struct {
	file string
	pod  corev1.Pod
}

func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

func nthIP(cidr string, n int) (string, error) {
	_, ipn, err := net.ParseCIDR(cidr)
	if err != nil {
		return "", err
	}
	ip := ipn.IP.To4()
	if ip == nil {
		return "", fmt.Errorf("%s: not IPv4", cidr)
	}
	v := uint32(ip[0])<<24 | uint32(ip[1])<<16 | uint32(ip[2])<<8 | uint32(ip[3])
	v += uint32(n)
	return net.IPv4(byte(v>>24), byte(v>>16), byte(v>>8), byte(v)).String(), nil
}

// prepareCluster reads the rendered control plane (its static Pods' flags must
// carry the control-plane host's facts), makes or keeps the PKI in the state
// directory and the cluster-admin kubeconfig, and builds the images each
// pool's hosts need.
func (p *Provider) prepareCluster(d *provider.Desired) (*cluster, error) {
	cp := p.controlPlaneHost()
	if cp == nil {
		return nil, fmt.Errorf("%s.pools: no %s pool: name the host the control plane runs on", field, model.ControlPlanePool)
	}
	m := d.Machines[model.ControlPlanePool]
	if m == nil {
		return nil, errors.New("no rendered control-plane machine")
	}
	cl := &cluster{stateDir: p.opts.StateDir, pkiDir: filepath.Join(p.opts.StateDir, "pki"),
		server: "https://" + net.JoinHostPort(cp.Address, strconv.Itoa(apiServerPort)), index: map[string]int{}, site: d.Site}
	for i, h := range p.hosts {
		cl.index[h.Node] = i
	}
	var err error
	if cl.cpPods, err = staticPods(m); err != nil {
		return nil, err
	}
	if err := cl.readRanges(cp); err != nil {
		return nil, err
	}
	if err := p.clusterPKI(cl, cp); err != nil {
		return nil, err
	}
	if cl.images, err = p.images(cl); err != nil {
		return nil, err
	}
	return cl, nil
}

// staticPods reads the static Pods of the rendered control-plane machine m.
func staticPods(m *render.Machine) ([]staticPod, error) {
	var pods []staticPod
	for _, f := range m.Files {
		if path.Dir(f.Path) != render.StaticPodDir || !strings.HasSuffix(f.Path, ".yaml") {
			continue
		}
		sp := staticPod{file: f.Path}
		if err := sigsyaml.Unmarshal(f.Content, &sp.pod); err != nil {
			return nil, fmt.Errorf("static Pod %s: %w", f.Path, err)
		}
		pods = append(pods, sp)
	}
	return pods, nil
}

// readRanges checks that the API server's static Pod carries the
// control-plane host cp's facts, and reads the Pods' and the Services'
// ranges and the cluster DNS address from the static Pods' flags.
func (cl *cluster) readRanges(cp *Host) error {
	var apiArgs, cmArgs []string
	for _, sp := range cl.cpPods {
		for _, c := range sp.pod.Spec.Containers {
			switch path.Base(first(c.Command)) {
			case "kube-apiserver":
				apiArgs = c.Command
			case "kube-controller-manager":
				cmArgs = c.Command
			}
		}
	}
	if apiArgs == nil {
		return fmt.Errorf("the rendered control plane (nodes/%s) has no kube-apiserver static Pod: enable the control-plane plugin", model.ControlPlanePool)
	}
	for flag, want := range map[string]string{
		"advertise-address":           cp.Address,
		"secure-port":                 strconv.Itoa(apiServerPort),
		"enable-bootstrap-token-auth": "true",
	} {
		if got := flagValue(apiArgs, flag); got != want {
			return fmt.Errorf("the rendered kube-apiserver static Pod has --%s=%s; on the control-plane host %s it must be %s: render with the hosts provider's facts", flag, got, cp.Address, want)
		}
	}
	cl.clusterCIDR, cl.serviceCIDR = flagValue(cmArgs, "cluster-cidr"), flagValue(apiArgs, "service-cluster-ip-range")
	if cl.clusterCIDR == "" || cl.serviceCIDR == "" {
		return errors.New("the hosts need the controller manager's --cluster-cidr and the API server's --service-cluster-ip-range (the control-plane plugin sets both)")
	}
	var err error
	cl.clusterDNS, err = nthIP(cl.serviceCIDR, 10)
	return err
}

// clusterPKI makes or keeps the PKI in the state directory, its API server
// certificate naming the first Service address and the control-plane host
// cp's, and writes the cluster-admin kubeconfig.
func (p *Provider) clusterPKI(cl *cluster, cp *Host) error {
	svcIP, err := nthIP(cl.serviceCIDR, 1)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cl.stateDir, 0o700); err != nil {
		return err
	}
	ips := []net.IP{}
	if ip := net.ParseIP(cp.Address); ip != nil {
		ips = append(ips, ip)
	}
	if err := clusterpki.EnsurePKI(cl.pkiDir, net.ParseIP(svcIP), ips...); err != nil {
		return err
	}
	_, err = clusterpki.WriteAdminKubeconfig(cl.pkiDir, cl.server, "kubeplug-"+p.opts.ClusterName, p.Kubeconfig())
	return err
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// Kubeconfig is the cluster-admin kubeconfig in the state directory.
func (p *Provider) Kubeconfig() string { return filepath.Join(p.opts.StateDir, "kubeconfig") }

// images are, per pool, the images its hosts' registries get: the sandbox
// image and the built-in images everywhere, the control plane's components
// (images of the cluster's own Kubernetes programs, under the names the
// static Pods give them) on the control-plane host.
func (p *Provider) images(cl *cluster) (map[string][]image, error) {
	progs, err := p.opts.Programs.withDefaults()
	if err != nil {
		return nil, err
	}
	pause, err := nodeimage.BinaryImage(filepath.Join(progs.LocalnodeBin, "pause"))
	if err != nil {
		return nil, fmt.Errorf("sandbox image: %w", err)
	}
	imagesDir := os.Getenv("KUBEPLUG_IMAGES_DIR")
	if imagesDir == "" {
		imagesDir = filepath.Join(progs.LocalnodeBin, "..", "..", "images", "bin")
	}
	builtins, missing, err := builtinImages(imagesDir)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		// A workload running one waits in ImagePullBackOff on Ready Nodes:
		// say so before it does, as the local provider does.
		p.opts.Events(provider.Event{Time: time.Now(), Step: "registry", Message: fmt.Sprintf("built-in images not built (make images; %s), so not on the hosts: %s", imagesDir, strings.Join(missing, ", "))})
	}
	common := append([]image{{sandboxImage, pause}}, builtins...)
	lc, err := filepath.EvalSymlinks(filepath.Join(progs.LocalclusterBin, "kubeplug-localcluster"))
	if err != nil {
		return nil, err
	}
	byCmd := map[string][]string{}
	var refs []string
	for _, sp := range cl.cpPods {
		for _, c := range sp.pod.Spec.Containers {
			if len(c.Command) == 0 {
				return nil, fmt.Errorf("static Pod %s: container %s names no command", sp.file, c.Name)
			}
			if _, ok := byCmd[c.Image]; !ok {
				refs = append(refs, c.Image)
			}
			byCmd[c.Image] = append(byCmd[c.Image], path.Base(c.Command[0]))
		}
	}
	out := map[string][]image{}
	for _, h := range p.hosts {
		out[h.Pool] = common
	}
	cpImages := slices.Clone(common)
	for _, ref := range refs {
		names := slices.Compact(slices.Sorted(slices.Values(byCmd[ref])))
		img, err := nodeimage.ComponentImage(lc, names...)
		if err != nil {
			return nil, err
		}
		cpImages = append(cpImages, image{ref, img})
	}
	out[model.ControlPlanePool] = cpImages
	return out, nil
}

// builtinImages are the built-in images (not those built on demand) whose
// binaries are in dir; missing names those that are not.
func builtinImages(dir string) (imgs []image, missing []string, err error) {
	for _, b := range nodeimage.BuiltinImages {
		if b.OnDemand {
			continue
		}
		bin := filepath.Join(dir, b.Binary)
		if _, err := os.Stat(bin); err != nil {
			missing = append(missing, b.Image)
			continue
		}
		img, err := nodeimage.BinaryImage(bin)
		if err != nil {
			return nil, nil, err
		}
		imgs = append(imgs, image{b.Image, img})
	}
	return imgs, missing, nil
}

// pushImages starts the host's registry and pushes imgs into it through the
// SSH connection (a tag that already names the image is left).
func (c *client) pushImages(ctx context.Context, imgs []image, progress func(string)) error {
	if _, err := c.run(ctx, "start the registry", "systemctl daemon-reload && systemctl enable --now kubeplug-registry.service containerd.service", nil); err != nil {
		return err
	}
	// containerd runs on without its CRI plugin when that fails to load
	// (the kernel's inotify instances used up, for one); the kubelet could
	// then never start: name it.
	out, err := c.run(ctx, "containerd's CRI plugin", `sleep 1; journalctl -u containerd.service --no-pager -o cat --since "$(systemctl show -p ActiveEnterTimestamp --value containerd.service)" | grep 'failed to load plugin.*io.containerd.grpc.v1.cri' | tail -n 1`, nil)
	if err != nil {
		return err
	}
	if msg := strings.TrimSpace(out); msg != "" {
		return fmt.Errorf("%s: containerd runs without its CRI plugin, so no kubelet can start: %s", label(c.host), msg)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return c.ssh.DialContext(ctx, "tcp", registryAddr)
	}}
	defer tr.CloseIdleConnections()
	opts := []remote.Option{remote.WithTransport(tr), remote.WithContext(ctx)}
	// The registry answers once it started.
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+registryAddr+"/v2/", nil)
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
		if err == nil {
			_ = resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: its registry (kubeplug-registry.service) does not answer on %s: %w", label(c.host), registryAddr, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	for _, im := range imgs {
		t, err := name.NewTag(im.ref)
		if err != nil {
			return fmt.Errorf("image %q: %w", im.ref, err)
		}
		ref, err := name.ParseReference(registryAddr+"/"+t.RepositoryStr()+":"+t.TagStr(), name.Insecure)
		if err != nil {
			return err
		}
		want, err := im.img.Digest()
		if err != nil {
			return err
		}
		if desc, err := remote.Head(ref, opts...); err == nil && desc.Digest == want {
			continue
		}
		progress("push " + im.ref)
		if err := remote.Write(ref, im.img, opts...); err != nil {
			return fmt.Errorf("%s: push %s: %w", label(c.host), im.ref, err)
		}
	}
	return nil
}

// nodeFiles are the provider's part of a host's boot (what a cloud's vendor
// data gives a machine, in the paths the rendered kubelet drop-in names): the
// cluster's CA, the kubelet's configuration and flags, the CNI configuration,
// containerd's registry mirror (and, under expansions, its configuration of
// the site registry: site.go), kube-proxy's configuration and identity, and
// the registry's unit; on the control-plane host also the PKI, the
// components' kubeconfig and the kubelet's own kubeconfig (kubeadm's
// kubelet.conf). token, when set, is the bootstrap token of a worker's first
// join. Identities are issued once into the state directory and kept, so a
// re-run delivers the same bytes.
func (p *Provider) nodeFiles(cl *cluster, h *Host, token string) ([]*bootFile, error) {
	ca, err := bounded.ReadFile(clusterpki.CACertPath(cl.pkiDir), 1<<20)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cl.stateDir, "nodes", h.Node)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	issue := func(base, cn string, orgs ...string) (cert, key []byte, err error) {
		cp, kp := filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key")
		if err := clusterpki.IssueClientCert(cl.pkiDir, cp, kp, cn, orgs...); err != nil {
			return nil, nil, err
		}
		if cert, err = bounded.ReadFile(cp, 1<<20); err != nil {
			return nil, nil, err
		}
		key, err = bounded.ReadFile(kp, 1<<20)
		return cert, key, err
	}
	kubeconfig := func(user map[string]string) []byte {
		b, _ := yaml.Marshal(map[string]any{
			"apiVersion": "v1", "kind": "Config",
			"clusters":        []any{map[string]any{"name": "kubeplug", "cluster": map[string]string{"server": cl.server, "certificate-authority": factPKIDir + "/ca.crt"}}},
			"users":           []any{map[string]any{"name": "node", "user": user}},
			"contexts":        []any{map[string]any{"name": "kubeplug", "context": map[string]string{"cluster": "kubeplug", "user": "node"}}},
			"current-context": "kubeplug",
		})
		return b
	}
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	proxyCert, proxyKey, err := issue("kube-proxy", "system:kube-proxy")
	if err != nil {
		return nil, err
	}
	podCIDR := podnet.PodCIDR(cl.clusterCIDR, cl.index[h.Node])
	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: /etc/kubernetes/pki/ca.crt}
authorization: {mode: Webhook}
clusterDNS: [%q]
clusterDomain: cluster.local
podCIDR: %q
rotateCertificates: true
staticPodPath: %s
failSwapOn: true
`, cl.clusterDNS, podCIDR, render.StaticPodDir)
	cni := podnet.MachineCNIConfig(podCIDR)
	proxy := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: %q
hostnameOverride: %q
clientConnection: {kubeconfig: /var/lib/kube-proxy/kubeconfig}
conntrack: {maxPerCore: 0}
`, cl.clusterCIDR, h.Node)
	files := []*bootFile{
		memFile(factPKIDir+"/ca.crt", 0o644, "", ca),
		memFile(render.KubeletConfigPath, 0o644, "", []byte(kubelet)),
		memFile(render.KubeletProviderEnvPath, 0o644, "", []byte("KUBELET_PROVIDER_ARGS=--node-ip="+h.Address+" --hostname-override="+h.Node+"\n")),
		memFile("/etc/cni/net.d/10-kubeplug.conflist", 0o644, "", []byte(cni)),
		memFile("/etc/containerd/certs.d/_default/hosts.toml", 0o644, "", fmt.Appendf(nil, "[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+registryAddr)),
		memFile("/var/lib/kube-proxy/kubeconfig", 0o600, "", kubeconfig(map[string]string{"client-certificate-data": b64(proxyCert), "client-key-data": b64(proxyKey)})),
		memFile("/var/lib/kube-proxy/config.yaml", 0o644, "", []byte(proxy)),
		memFile("/etc/systemd/system/kubeplug-registry.service", 0o644, "", []byte(registryUnit)),
	}
	progs, err := p.opts.Programs.withDefaults()
	if err != nil {
		return nil, err
	}
	reg, err := fileOf(filepath.Join(progs.LocalnodeBin, "kubeplug-registry"), "/usr/local/bin/kubeplug-registry", 0o755)
	if err != nil {
		return nil, err
	}
	files = append(files, reg)
	files = append(files, siteFiles(cl.site)...)
	if token != "" {
		files = append(files, memFile(render.KubeletBootstrapKubeconfigPath, 0o600, "", kubeconfig(map[string]string{"token": token})))
	}
	if h.Pool == model.ControlPlanePool {
		cpFiles, err := controlPlaneHostFiles(cl, h, issue)
		if err != nil {
			return nil, err
		}
		files = append(files, cpFiles...)
	}
	return files, nil
}

// controlPlaneHostFiles are the control-plane host's own part of nodeFiles:
// the PKI (but its CA, delivered to every host), the components' kubeconfig
// and the kubelet's own kubeconfig (kubeadm's kubelet.conf), with a client
// certificate issue makes.
func controlPlaneHostFiles(cl *cluster, h *Host, issue func(base, cn string, orgs ...string) (cert, key []byte, err error)) ([]*bootFile, error) {
	var files []*bootFile
	entries, err := os.ReadDir(cl.pkiDir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") || e.Name() == "ca.crt" {
			continue
		}
		b, err := bounded.ReadFile(filepath.Join(cl.pkiDir, e.Name()), 1<<20)
		if err != nil {
			return nil, err
		}
		mode := uint32(0o644)
		if strings.HasSuffix(e.Name(), ".key") {
			mode = 0o600
		}
		files = append(files, memFile(path.Join(factPKIDir, e.Name()), mode, "", b))
	}
	admin, err := clusterpki.WriteAdminKubeconfig(cl.pkiDir, cl.server, "kubernetes-admin")
	if err != nil {
		return nil, err
	}
	b, err := clientcmd.Write(*admin)
	if err != nil {
		return nil, err
	}
	files = append(files, memFile(factKubeconfig, 0o600, "", b))
	cert, key, err := issue("kubelet-client", "system:node:"+h.Node, "system:nodes")
	if err != nil {
		return nil, err
	}
	kubelet := *admin
	kubelet.AuthInfos = map[string]*clientcmdapi.AuthInfo{"kubernetes-admin": {ClientCertificateData: cert, ClientKeyData: key}}
	if b, err = clientcmd.Write(kubelet); err != nil {
		return nil, err
	}
	files = append(files, memFile(render.KubeletKubeconfigPath, 0o600, "", b))
	return files, nil
}
