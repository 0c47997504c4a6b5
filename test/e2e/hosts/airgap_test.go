package hosts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/pkg/provider/nodeimage"
)

// sitePlugin is the site's workload (its image named in the source
// registry SRC), a node file downloaded from SRC pinned by SUM, and the
// kubelet's thresholds of the fleet plugin (the test hosts' disk is this
// machine's, shared and nearly full).
const sitePlugin = `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: site-app, version: 0.1.0, description: a workload and a node file from the source}
spec:
  contributes:
    kubernetes:
      manifests: [manifests/]
    nodes:
      - roles: [worker]
        files:
          - {path: /opt/site/tool, url: "http://SRC/files/tool", sha256: SUM, mode: "0755"}
        kubelet:
          flags: {eviction-hard: "memory.available<100Mi,nodefs.available<1%,imagefs.available<1%", image-gc-high-threshold: "100", image-gc-low-threshold: "99"}
  validate:
    - name: available
      wait: {apiVersion: apps/v1, kind: Deployment, namespace: default, name: site-app, timeout: 3m}
`

const siteManifests = `apiVersion: apps/v1
kind: Deployment
metadata: {name: site-app, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: site-app}}
  template:
    metadata: {labels: {app: site-app}}
    spec:
      containers:
        - name: app
          image: SRC/site/app:v1
          args: [netexec, --http-port=8080]
          readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
`

func airGapClusterFile(key, known string, addrs []string) string {
	return fmt.Sprintf(`apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: airgap}
spec:
  kubernetesVersion: 1.37.1
  provider:
    hosts:
      ssh: {user: %s, keyFile: %s}
      knownHostsFile: %s
      pools:
        - name: control-plane
          hosts: [{address: %s}]
        - name: workers
          hosts: [{address: %s}]
  nodePools:
    - {name: workers, role: worker, count: 1}
  plugins:
    sources: [{dir: ./plugins}]
    enabled:
      - name: control-plane
        values: {clusterCIDR: 10.246.0.0/16}
      - name: site-app
`, sshUser, key, known, addrs[0], addrs[1])
}

// TestAirGap: an air-gapped site on hosts (1 control plane, 1 worker). Where
// the sources are reachable, an expansion is packed from the cluster file:
// the workload's image from a source registry and a node file downloaded
// from the same server. The source is then stopped; a site registry runs on
// the address the hosts reach this machine at (the machines' bridge). `up
// --expansion-dir --site-registry` pushes the image there, rewrites the
// workload to it, and points the hosts' containerd at it: the Pod runs the
// site's image, pulled by the worker from the site registry (its requests
// seen there), and the node file is the expansion's, delivered over SSH
// (kubeplug's download cache is empty). down leaves no registry
// configuration and no node file on the hosts.
func TestAirGap(t *testing.T) {
	requireHostsE2E(t)
	dir := t.TempDir()
	nodePrograms(t, dir)
	agnhost := filepath.Join(os.Getenv("KUBEPLUG_LOCALNODE_BIN"), "..", "..", "images", "bin", "agnhost")
	if v := os.Getenv("KUBEPLUG_IMAGES_DIR"); v != "" {
		agnhost = filepath.Join(v, "agnhost")
	}
	base, err := nodeimage.BinaryImage(agnhost)
	if err != nil {
		t.Fatalf("the workload's image is made of the built-in agnhost (make images): %v", err)
	}
	// Not the built-in image the hosts' own registries hold: a digest of its own.
	cf, err := base.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.Labels = map[string]string{"dev.kubeplug.test": "airgap"}
	appImg, err := mutate.ConfigFile(base, cf)
	if err != nil {
		t.Fatal(err)
	}
	appDigest, err := appImg.Digest()
	if err != nil {
		t.Fatal(err)
	}

	// Connected: the source, a registry and a file server on loopback.
	tool := []byte("#!/bin/sh\necho site tool\n")
	sum := sha256.Sum256(tool)
	mux := http.NewServeMux()
	mux.HandleFunc("/files/tool", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(tool) })
	mux.Handle("/", registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	src := httptest.NewServer(mux)
	defer src.Close()
	srcHost := strings.TrimPrefix(src.URL, "http://")
	ref, err := name.ParseReference(srcHost + "/site/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, appImg); err != nil {
		t.Fatal(err)
	}

	ms, key := sshHosts(t, 2)
	var addrs []string
	for i, m := range ms {
		addrs = append(addrs, m.Node.Network.NodeIP(i).String())
	}
	known := filepath.Join(dir, "known_hosts")
	state := filepath.Join(dir, "state")
	file := filepath.Join(dir, "cluster.yaml")
	write(t, filepath.Join(dir, "plugins", "site-app", "plugin.yaml"), strings.NewReplacer("SRC", srcHost, "SUM", hex.EncodeToString(sum[:])).Replace(sitePlugin))
	write(t, filepath.Join(dir, "plugins", "site-app", "manifests", "app.yaml"), strings.ReplaceAll(siteManifests, "SRC", srcHost))
	write(t, file, airGapClusterFile(key, known, addrs))
	write(t, filepath.Join(dir, "site", "expansion.yaml"), "apiVersion: kubeplug.dev/v1alpha1\nkind: Expansion\nmetadata: {name: site, version: 1.0.0}\nspec: {}\n")
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache-connected"))
	kp := func(args ...string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
		defer cancel()
		out := &watched{}
		began := time.Now()
		code := cmd.Main(ctx, args, cmd.Streams{In: strings.NewReader(""), Out: out, Err: out})
		t.Logf("kubeplug %s: exit %d in %s", strings.Join(args, " "), code, time.Since(began).Round(time.Millisecond))
		return code, out.String()
	}
	exp := filepath.Join(dir, "exp")
	if code, out := kp("expansion", "create", "-f", filepath.Join(dir, "site", "expansion.yaml"), "-f", file, "-o", filepath.Join(exp, "site.tar")); code != 0 {
		t.Fatalf("expansion create: exit %d\n%s", code, out)
	}

	// Air-gapped: the source is gone, and so is kubeplug's download cache.
	src.Close()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache-site"))
	gw := ms[0].Node.Network.Gateway().String()
	l, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatalf("the site registry on the hosts' gateway %s: %v", gw, err)
	}
	pulls := &requestLog{}
	site := &http.Server{Handler: pulls.wrap(registry.New(registry.Logger(log.New(io.Discard, "", 0)))), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = site.Serve(l) }()
	defer func() { _ = site.Close() }()
	siteHost := l.Addr().String()
	args := []string{"-f", file, "--state-dir", state}
	downed := false
	t.Cleanup(func() {
		if !downed {
			if code, out := kp(append([]string{"down"}, args...)...); code != 0 {
				t.Errorf("down exited %d:\n%s", code, out)
			}
		}
	})
	upArgs := append([]string{"up", "--no-kubeconfig-update", "--accept-new-host-keys", "--expansion-dir", exp, "--site-registry", siteHost, "--site-registry-plain-http"}, args...)
	code, out := kp(upArgs...)
	if code != 0 {
		diagnose(t, state, addrs, key, known)
		t.Fatalf("up: exit %d\n%s", code, out)
	}
	t.Logf("up's output:\n%s", out)

	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(state, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=site-app"})
	if err != nil {
		t.Fatal(err)
	}
	want := siteHost + "/site/app:v1"
	if len(pods.Items) != 1 {
		t.Fatalf("%d Pods of the site's workload, want 1", len(pods.Items))
	}
	p := pods.Items[0]
	if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName != "workers-0" || p.Spec.Containers[0].Image != want {
		t.Errorf("the site's Pod: %s on %s running %s, want Running on workers-0 running %s", p.Status.Phase, p.Spec.NodeName, p.Spec.Containers[0].Image, want)
	}
	if len(p.Status.ContainerStatuses) != 1 || !strings.HasSuffix(p.Status.ContainerStatuses[0].ImageID, appDigest.String()) {
		t.Errorf("the site's Pod runs image %v, want the site's %s", p.Status.ContainerStatuses, appDigest)
	}
	// containerd on the worker pulled it from the site registry.
	if got := pulls.from(addrs[1], "/v2/site/app/manifests/"); got == 0 {
		t.Errorf("the site registry saw no manifest request from the worker %s; it saw:\n%s", addrs[1], pulls)
	}
	cl := sshClients(t, addrs, key, known)
	hostsToml := "/etc/containerd/certs.d/" + siteHost + "/hosts.toml"
	for i := range addrs {
		if got := cl.run(t, i, "cat "+hostsToml); !strings.Contains(got, `server = "http://`+siteHost+`"`) {
			t.Errorf("host %s: %s = %q", addrs[i], hostsToml, got)
		}
	}
	if got := cl.run(t, 1, "/opt/site/tool"); got != "site tool\n" {
		t.Errorf("the expansion's node file on %s: /opt/site/tool says %q", addrs[1], got)
	}

	downed = true
	if code, out = kp(append([]string{"down"}, args...)...); code != 0 {
		t.Fatalf("down: exit %d\n%s", code, out)
	}
	cl = sshClients(t, addrs, key, known)
	for i := range addrs {
		got := cl.run(t, i, "for f in /etc/containerd "+hostsToml+" /opt/site/tool /usr/local/bin/kubeplug-registry /var/lib/kubeplug; do if [ -e $f ]; then echo left: $f; fi; done")
		got += cl.run(t, i, "pgrep -a -f '[c]ontainerd|[k]ubelet|[a]gnhost' || true")
		if strings.TrimSpace(got) != "" {
			t.Errorf("host %s after down:\n%s", addrs[i], got)
		}
	}
}

// requestLog records the requests a registry answers: client address and path.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (r *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		host, _, _ := net.SplitHostPort(req.RemoteAddr)
		r.mu.Lock()
		r.reqs = append(r.reqs, host+" "+req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	})
}

// from counts the requests from host whose path starts with prefix.
func (r *requestLog) from(host, prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.reqs {
		f := strings.Fields(s)
		if f[0] == host && strings.HasPrefix(f[2], prefix) {
			n++
		}
	}
	return n
}

func (r *requestLog) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.reqs, "\n")
}
