package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
	"github.com/kubeplug/kubeplug/pkg/provider/nodeimage"
)

// TestExpansionAirGap is an expansion's two phases on a real node, the whole
// site at once. Connected: a source registry on loopback holds two images
// built from Go — the demo plugin's (a manifest) and the web plugin's (a Helm
// chart's) — and CoreDNS, built from Go too, exists only as a `docker save`
// tarball; expansion create packs the cluster (its plugins, the images their
// render references, the archive's image by the name it carries) with a node
// file, installer hooks, the site's operator (a plugin, its image from Go) and
// two delegated conditions: the demo plugin's check, and the cluster's own
// readiness condition provider/dns-ready, which the test answers as the site's
// DNS operator. The expansion skips the local provider's step node-routes.
// The cluster file's allowlist allows that skip and those delegations; the
// same expansion under an allowlist without the step is refused by up before
// anything starts. Air-gapped: the source registry is stopped, no built-in
// image is on hand, and up --expansion-dir brings the cluster up: the Pods on
// the real node run the manifest's, the chart's and the archive's images under
// the site registry's names (pulled through the cluster's registry, where up
// loaded them), no Pod names another registry, node-routes was skipped, the
// controlPlaneReady hook's kubectl reached the new cluster and not the user's
// current context (a decoy API server that counts what reaches it), and up
// finished once the operators set the delegated conditions. Without the
// expansion, up returns the workloads to their own image names.
func TestExpansionAirGap(t *testing.T) {
	nodeBins(t)

	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	file := filepath.Join(dir, "cluster.yaml")
	kpCode := func(args ...string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		var out bytes.Buffer
		code := cmd.Main(ctx, args, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &out})
		return code, out.String()
	}
	kp := func(args ...string) string {
		t.Helper()
		code, out := kpCode(args...)
		if code != 0 {
			t.Fatalf("kubeplug %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}
	id := realnode.ClusterID(state)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var out bytes.Buffer
		_ = cmd.Main(ctx, []string{"down", "-f", file, "--state-dir", state}, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &out})
		checkNothingLeft(t, state, id)
	})
	// Connected: the source registry and the workloads' images, built from Go.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	src := strings.TrimPrefix(srv.URL, "http://")
	app, err := nodeimage.BinaryImage(buildApp(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	pushTo := func(img v1.Image, refs ...string) {
		t.Helper()
		for _, r := range refs {
			ref, err := name.ParseReference(r)
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.Write(ref, img); err != nil {
				t.Fatal(err)
			}
		}
	}
	pushTo(app, src+"/demo/app:v1", src+"/team/web:v1")
	// The site's operator, its image from Go too, packed as a plugin.
	opImg, err := nodeimage.BinaryImage(buildGo(t, dir, "site-operator", "github.com/kubeplug/kubeplug/examples/plugins/site-operator/operator"))
	if err != nil {
		t.Fatal(err)
	}
	pushTo(opImg, src+"/site/operator:0.1.0")
	// CoreDNS, built from its Go module, only as a docker save tarball under
	// the name the cluster-dns plugin gives it.
	dnsArchive, dnsDigest := corednsArchive(t, dir)

	if err := os.MkdirAll(filepath.Join(dir, "site", "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	kp("plugin", "package", filepath.Join("..", "..", "..", "examples", "plugins", "site-operator"), "-o", filepath.Join(dir, "site", "plugins", "site-operator-0.1.0.tgz"))
	write(t, filepath.Join(dir, "plugins", "demo", "plugin.yaml"), plugin)
	write(t, filepath.Join(dir, "plugins", "demo", "manifests", "demo.yaml"), strings.ReplaceAll(manifests, "example.com/demo/app:v1", src+"/demo/app:v1"))
	writeWebChart(t, filepath.Join(dir, "plugins", "web"), src+"/team/web:v1")
	const allow = `  expansions:
    allow:
      skipSteps: [provider/node-routes]
      delegateConditions: [provider/dns-ready, demo/available]
`
	clusterFile := strings.ReplaceAll(cluster("cluster-dns", "demo", "web"), "10.245.0.0/16", "10.247.0.0/16")
	write(t, file, strings.Replace(clusterFile, "  plugins:\n", allow+"  plugins:\n", 1))
	strict := filepath.Join(dir, "strict.yaml")
	write(t, strict, strings.Replace(clusterFile, "  plugins:\n", strings.ReplaceAll(allow, "provider/node-routes", "validate")+"  plugins:\n", 1))
	hookLog := filepath.Join(dir, "hook.log")
	write(t, filepath.Join(dir, "site", "expansion.yaml"), `apiVersion: kubeplug.dev/v1alpha1
kind: Expansion
metadata: {name: site, version: 1.0.0}
spec:
  plugins: [{path: plugins/site-operator-0.1.0.tgz}]
  images: [`+src+`/site/operator:0.1.0]
  overrides:
    plugins:
      site-operator: {image: "`+src+`/site/operator:0.1.0", nodeSelector: {kubeplug.dev/pool: real}}
  skipSteps: [provider/node-routes]
  delegateConditions:
  - {check: demo/available, operator: site-storage, condition: StorageReady, timeout: 2m}
  - {check: provider/dns-ready, operator: site-dns, condition: DNSReady, timeout: 3m}
  nodes:
  - pools: [real]
    files:
    - {path: /etc/site/motd, source: files/motd}
  hooks:
  - {name: reach, at: controlPlaneReady, command: [sh, -c, '"$KUBEPLUG_LOCALCLUSTER_BIN/kubectl" create configmap hook-reached -n default --from-literal=hook=$KUBEPLUG_HOOK --request-timeout=30s']}
  - {name: done, at: afterInstall, command: [sh, -c, 'echo "$KUBEPLUG_HOOK $KUBEPLUG_SITE_REGISTRY" > `+hookLog+`']}
`)
	write(t, filepath.Join(dir, "site", "files", "motd"), "welcome to the site\n")
	exp := filepath.Join(dir, "exp")
	out := kp("expansion", "create", "-f", filepath.Join(dir, "site", "expansion.yaml"), "-f", file, "--image-archive", dnsArchive, "-o", filepath.Join(exp, "site.tar"))
	t.Logf("expansion create:\n%s", out)

	// Air-gapped.
	srv.Close()
	const site = "registry.site.example:5000"
	// No built-in image on hand (make images' directory is empty): the
	// cluster's DNS runs what the expansion carries, or nothing.
	t.Setenv("KUBEPLUG_IMAGES_BIN", t.TempDir())

	// The same expansion under an allowlist without the step: refused before
	// anything starts.
	strictState := filepath.Join(dir, "strict-state")
	code, out := kpCode("up", "-f", strict, "--state-dir", strictState, "--no-kubeconfig-update", "--expansion-dir", exp, "--site-registry", site)
	if code == 0 || !strings.Contains(out, "expansion site skips step provider/node-routes, which the site's allowlist does not allow") {
		t.Fatalf("up under an allowlist without provider/node-routes: exit %d, want it refused naming the expansion and the step\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(strictState, "controlplane")); err == nil {
		t.Error("the refused up started a control plane")
	}

	// The user's current context is a decoy API server, which counts what
	// reaches it; a hook's kubectl must reach the new cluster instead.
	var decoyHits atomic.Int32
	decoy := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		decoyHits.Add(1)
		http.Error(w, "the decoy is not the cluster being built", http.StatusInternalServerError)
	}))
	defer decoy.Close()
	decoyConfig := filepath.Join(dir, "user.kubeconfig")
	write(t, decoyConfig, `apiVersion: v1
kind: Config
current-context: users-own
clusters:
- name: users-own
  cluster: {server: "`+decoy.URL+`", insecure-skip-tls-verify: true}
contexts:
- name: users-own
  context: {cluster: users-own, user: users-own}
users:
- name: users-own
  user: {token: the-users-token}
`)
	t.Setenv("KUBECONFIG", decoyConfig)

	// The site's DNS operator, played by the test: it sets DNSReady on
	// SiteCondition site-dns once the expansion's plugin has made it.
	kubeconfig := filepath.Join(state, "controlplane", "kubeconfig")
	opCtx, stopOp := context.WithCancel(context.Background())
	opDone := make(chan error, 1)
	go func() { opDone <- answerAsOperator(opCtx, kubeconfig, "site-dns", "DNSReady") }()
	stopOperator := sync.OnceValue(func() error { stopOp(); return <-opDone })
	defer func() { _ = stopOperator() }()

	var upOut, upErr bytes.Buffer
	upCtx, cancelUp := context.WithTimeout(context.Background(), 6*time.Minute)
	code = cmd.Main(upCtx, []string{"up", "-f", file, "--state-dir", state, "--no-kubeconfig-update", "--expansion-dir", exp, "--site-registry", site, "-o", "json"},
		cmd.Streams{In: strings.NewReader(""), Out: &upOut, Err: &upErr})
	cancelUp()
	t.Logf("up with the expansion:\n%s", upErr.String())
	if code != 0 {
		o := upOut.String()
		t.Fatalf("up with the expansion: exit %d\n%s\n…%s", code, upErr.String(), o[max(0, len(o)-4000):])
	}
	if !strings.Contains(upErr.String(), "step provider/node-routes of the local provider skipped: expansion site says the site provides it (skipSteps)") {
		t.Errorf("up did not say it skipped provider/node-routes")
	}
	// The cluster's DNS readiness was the site operator's to say: up's
	// provider check is the wait for its condition, not kubeplug's own.
	// up -o json is a stream of events, then {"failed": …, "result": …}.
	var res struct {
		Result struct {
			Checks []struct {
				Plugin, Name string
				OK           bool
			}
		}
	}
	for dec := json.NewDecoder(&upOut); ; {
		var line struct{ Result json.RawMessage }
		if err := dec.Decode(&line); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("up -o json: %v", err)
		}
		if line.Result != nil {
			if err := json.Unmarshal(line.Result, &res.Result); err != nil {
				t.Fatalf("up -o json: the result: %v", err)
			}
		}
	}
	const delegatedDNS = "dns-ready (delegated by expansion site to operator site-dns: condition DNSReady on SiteCondition site-dns)"
	var providerChecks []string
	for _, c := range res.Result.Checks {
		if c.Plugin == "provider" {
			providerChecks = append(providerChecks, fmt.Sprintf("%s ok=%v", c.Name, c.OK))
		}
	}
	if len(providerChecks) != 1 || providerChecks[0] != delegatedDNS+" ok=true" {
		t.Errorf("up's provider checks: %q, want only %q passed", providerChecks, delegatedDNS)
	}
	if err := stopOperator(); err != nil {
		t.Errorf("the site's DNS operator: %v", err)
	}
	client := clientFor(t, kubeconfig)
	pod := runningPod(t, client, "app=demo")
	// The delegated checks: up waited for the operators — the site-operator
	// plugin on the real node, and the test — to set their conditions.
	op := runningPodIn(t, client, "site-system", "app=site-operator")
	if op.Spec.NodeName != "real-0" || op.Spec.Containers[0].Image != site+"/site/operator:0.1.0" {
		t.Errorf("the site operator runs %s on %s", op.Spec.Containers[0].Image, op.Spec.NodeName)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dc := dynamic.NewForConfigOrDie(cfg)
	for _, want := range []struct{ operator, condition, reason string }{
		{"site-storage", "StorageReady", "ProbePassed"},
		{"site-dns", "DNSReady", "SiteDNS"},
	} {
		sc, err := dc.Resource(siteConditions).Get(context.Background(), want.operator, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(sc.Object, "status", "conditions")
		if len(conds) != 1 || conds[0].(map[string]any)["type"] != want.condition || conds[0].(map[string]any)["status"] != "True" || conds[0].(map[string]any)["reason"] != want.reason {
			t.Errorf("SiteCondition %s: %v", want.operator, conds)
		}
	}
	if pod.Spec.NodeName != "real-0" || pod.Spec.Containers[0].Image != site+"/demo/app:v1" {
		t.Fatalf("demo runs %s on %s, want %s/demo/app:v1 on real-0", pod.Spec.Containers[0].Image, pod.Spec.NodeName, site)
	}
	// The chart's image, rewritten by the release's post-renderer and pulled
	// by the real node.
	if web := runningPodIn(t, client, "web", "app=web"); web.Spec.NodeName != "real-0" || web.Spec.Containers[0].Image != site+"/team/web:v1" {
		t.Errorf("the web chart's Pod runs %s on %s, want %s/team/web:v1 on real-0", web.Spec.Containers[0].Image, web.Spec.NodeName, site)
	}
	// The archive's image: CoreDNS runs on the real node under the site
	// registry's name, and is the archive's (no built-in image was on hand).
	dns := runningPodIn(t, client, "kube-system", "k8s-app=kube-dns")
	if dns.Spec.NodeName != "real-0" || dns.Spec.Containers[0].Image != site+"/coredns/coredns:v1.15.0" {
		t.Errorf("CoreDNS runs %s on %s, want %s/coredns/coredns:v1.15.0 on real-0", dns.Spec.Containers[0].Image, dns.Spec.NodeName, site)
	}
	if got := dns.Status.ContainerStatuses[0].ImageID; !strings.HasSuffix(got, dnsDigest) {
		t.Errorf("CoreDNS runs image %s, want the archive's %s", got, dnsDigest)
	}
	pods, err := client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			if !strings.HasPrefix(c.Image, site+"/") {
				t.Errorf("pod %s/%s names another registry than the site's: %s", p.Namespace, p.Name, c.Image)
			}
		}
	}
	// The controlPlaneReady hook's kubectl reached the new cluster, and
	// nothing reached the user's current context.
	cm, err := client.CoreV1().ConfigMaps("default").Get(context.Background(), "hook-reached", metav1.GetOptions{})
	if err != nil || cm.Data["hook"] != "controlPlaneReady" {
		t.Errorf("the controlPlaneReady hook's ConfigMap in the new cluster: %v %v", cm.Data, err)
	}
	if n := decoyHits.Load(); n != 0 {
		t.Errorf("the user's current context (the decoy) was reached %d time(s)", n)
	}
	if b, err := os.ReadFile(hookLog); err != nil || string(b) != "afterInstall "+site+"\n" {
		t.Errorf("the afterInstall hook wrote %q (%v)", b, err)
	}
	// The expansion's node file is on the real machine, and only there.
	motd := func(node string) string {
		b, _ := os.ReadFile(filepath.Join(state, "machines", node, "root", "etc", "site", "motd"))
		return string(b)
	}
	if got := motd("real-0"); got != "welcome to the site\n" {
		t.Errorf("/etc/site/motd on real-0 = %q", got)
	}
	if got := motd("sim-0"); got != "" {
		t.Errorf("/etc/site/motd on sim-0 (not in the expansion's pools) = %q", got)
	}

	// Without the expansion: the default again (the images under their own
	// names, still pulled through the cluster's registry, and dns-ready
	// checked by kubeplug: the archive's CoreDNS answers).
	kp("up", "-f", file, "--state-dir", state, "--no-kubeconfig-update")
	for _, w := range []struct{ ns, name, image string }{
		{"default", "demo", src + "/demo/app:v1"},
		{"web", "web", src + "/team/web:v1"},
		{"kube-system", "coredns", "registry.k8s.io/coredns/coredns:v1.15.0"},
	} {
		d, err := client.AppsV1().Deployments(w.ns).Get(context.Background(), w.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != w.image {
			t.Errorf("without the expansion %s/%s names %s, want %s", w.ns, w.name, got, w.image)
		}
	}
	if got := motd("real-0"); got != "" {
		t.Errorf("without the expansion /etc/site/motd on real-0 = %q, want it gone", got)
	}
	if _, err := client.AppsV1().Deployments("site-system").Get(context.Background(), "site-operator", metav1.GetOptions{}); err == nil {
		t.Error("without the expansion the site operator is still deployed")
	}
}

var siteConditions = schema.GroupVersionResource{Group: "expansion.kubeplug.dev", Version: "v1alpha1", Resource: "siteconditions"}

// answerAsOperator plays a site operator: once the cluster at kubeconfig
// answers and holds SiteCondition operator, it sets condition to True on it
// (reason SiteDNS). It returns nil once set, the last error when ctx ends
// before.
func answerAsOperator(ctx context.Context, kubeconfig, operator, condition string) error {
	patch := []byte(`{"status":{"conditions":[{"type":"` + condition + `","status":"True","reason":"SiteDNS","message":"the site's DNS answers","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)
	err := errors.New("the cluster never answered")
	for {
		if cfg, cerr := clientcmd.BuildConfigFromFlags("", kubeconfig); cerr == nil {
			var dc *dynamic.DynamicClient
			if dc, err = dynamic.NewForConfig(cfg); err == nil {
				if _, err = dc.Resource(siteConditions).Patch(ctx, operator, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err == nil {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("SiteCondition %s not answered: %w", operator, err)
		case <-time.After(time.Second):
		}
	}
}

// corednsArchive writes CoreDNS (make images' binary) as a docker save
// tarball named registry.k8s.io/coredns/coredns:v1.15.0, the cluster-dns
// plugin's image, and returns its path and the image's digest.
func corednsArchive(t *testing.T, dir string) (string, string) {
	t.Helper()
	bin, err := controlplane.FindBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	images := filepath.Join(filepath.Dir(filepath.Dir(bin)), "images", "bin")
	if d := os.Getenv("KUBEPLUG_IMAGES_BIN"); d != "" {
		images = d
	}
	img, err := nodeimage.BinaryImage(filepath.Join(images, "coredns"))
	if err != nil {
		t.Fatalf("CoreDNS is not built (make images): %v", err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("registry.k8s.io/coredns/coredns:v1.15.0")
	archive := filepath.Join(dir, "coredns.tar")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		t.Fatal(err)
	}
	return archive, digest.String()
}

// writeWebChart writes plugin web at dir: a Helm chart whose Deployment, on
// the real node, runs image (the chart's default value).
func writeWebChart(t *testing.T, dir, image string) {
	t.Helper()
	write(t, filepath.Join(dir, "plugin.yaml"), `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: web, version: 0.1.0, description: a workload from a Helm chart}
spec:
  contributes:
    kubernetes:
      helmReleases:
      - {name: web, chart: charts/web, namespace: web}
`)
	write(t, filepath.Join(dir, "charts", "web", "Chart.yaml"), "apiVersion: v2\nname: web\nversion: 0.1.0\n")
	write(t, filepath.Join(dir, "charts", "web", "values.yaml"), "image: "+image+"\n")
	write(t, filepath.Join(dir, "charts", "web", "templates", "deploy.yaml"), `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {kubeplug.dev/pool: real}
      containers:
      - name: web
        image: {{ .Values.image }}
        args: [serve]
        ports: [{containerPort: 8080}]
`)
}
