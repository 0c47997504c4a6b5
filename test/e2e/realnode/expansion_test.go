package realnode

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
	"github.com/kubeplug/kubeplug/pkg/provider/nodeimage"
)

// TestExpansionAirGap is an expansion's two phases on a real node. Connected: a
// source registry on loopback holds an image built from Go; expansion create
// packs the cluster (its plugin, the image its render references) with a node
// file, an installer hook, the site's operator (a plugin, its image from Go)
// and a check delegated to it. Air-gapped: the source registry is stopped, and
// up --expansion-dir brings the cluster up: the Pod on the real node runs the
// image under the site registry's name (pulled through the cluster's registry,
// where up loaded it), no Pod names the source registry, the hook ran, and up
// finished once the operator, on the real node, set the delegated condition. Without
// the expansion, up returns the workload to its own image name.
func TestExpansionAirGap(t *testing.T) {
	nodeBins(t)

	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	file := filepath.Join(dir, "cluster.yaml")
	kp := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var out bytes.Buffer
		if code := cmd.Main(ctx, args, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &out}); code != 0 {
			t.Fatalf("kubeplug %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
		}
		return out.String()
	}
	id := realnode.ClusterID(state)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var out bytes.Buffer
		_ = cmd.Main(ctx, []string{"down", "-f", file, "--state-dir", state}, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &out})
		checkNothingLeft(t, state, id)
	})

	// Connected: the source registry and the workload's image, built from Go.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	src := strings.TrimPrefix(srv.URL, "http://")
	img, err := nodeimage.BinaryImage(buildApp(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(src + "/demo/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	// The site's operator, its image from Go too, packed as a plugin.
	opImg, err := nodeimage.BinaryImage(buildGo(t, dir, "site-operator", "github.com/kubeplug/kubeplug/examples/plugins/site-operator/operator"))
	if err != nil {
		t.Fatal(err)
	}
	opRef, err := name.ParseReference(src + "/site/operator:0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(opRef, opImg); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "site", "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	kp("plugin", "package", filepath.Join("..", "..", "..", "examples", "plugins", "site-operator"), "-o", filepath.Join(dir, "site", "plugins", "site-operator-0.1.0.tgz"))
	write(t, filepath.Join(dir, "plugins", "demo", "plugin.yaml"), plugin)
	write(t, filepath.Join(dir, "plugins", "demo", "manifests", "demo.yaml"), strings.ReplaceAll(manifests, "example.com/demo/app:v1", src+"/demo/app:v1"))
	write(t, file, strings.ReplaceAll(cluster("demo"), "10.245.0.0/16", "10.247.0.0/16"))
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
  delegateConditions:
  - {check: demo/available, operator: site-storage, condition: StorageReady, timeout: 2m}
  nodes:
  - pools: [real]
    files:
    - {path: /etc/site/motd, source: files/motd}
  hooks:
  - {name: done, at: afterInstall, command: [sh, -c, 'echo "$KUBEPLUG_HOOK $KUBEPLUG_SITE_REGISTRY" > `+hookLog+`']}
`)
	write(t, filepath.Join(dir, "site", "files", "motd"), "welcome to the site\n")
	exp := filepath.Join(dir, "exp")
	kp("expansion", "create", "-f", filepath.Join(dir, "site", "expansion.yaml"), "-f", file, "-o", filepath.Join(exp, "site.tar"))

	// Air-gapped.
	srv.Close()
	const site = "registry.site.example:5000"
	kp("up", "-f", file, "--state-dir", state, "--no-kubeconfig-update", "--expansion-dir", exp, "--site-registry", site)
	kubeconfig := filepath.Join(state, "controlplane", "kubeconfig")
	client := clientFor(t, kubeconfig)
	pod := runningPod(t, client, "app=demo")
	// The delegated check: up waited for the operator, on the real node, to
	// set the condition.
	op := runningPodIn(t, client, "site-system", "app=site-operator")
	if op.Spec.NodeName != "real-0" || op.Spec.Containers[0].Image != site+"/site/operator:0.1.0" {
		t.Errorf("the site operator runs %s on %s", op.Spec.Containers[0].Image, op.Spec.NodeName)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dc := dynamic.NewForConfigOrDie(cfg)
	scGVR := schema.GroupVersionResource{Group: "expansion.kubeplug.dev", Version: "v1alpha1", Resource: "siteconditions"}
	sc, err := dc.Resource(scGVR).Get(context.Background(), "site-storage", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(sc.Object, "status", "conditions")
	if len(conds) != 1 || conds[0].(map[string]any)["type"] != "StorageReady" || conds[0].(map[string]any)["status"] != "True" || conds[0].(map[string]any)["reason"] != "ProbePassed" {
		t.Errorf("SiteCondition site-storage: %v", conds)
	}
	if pod.Spec.NodeName != "real-0" || pod.Spec.Containers[0].Image != site+"/demo/app:v1" {
		t.Fatalf("demo runs %s on %s, want %s/demo/app:v1 on real-0", pod.Spec.Containers[0].Image, pod.Spec.NodeName, site)
	}
	pods, err := client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			if strings.Contains(c.Image, src) {
				t.Errorf("pod %s/%s names the source registry: %s", p.Namespace, p.Name, c.Image)
			}
		}
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

	// Without the expansion: the default again (the image under its own name,
	// still pulled through the cluster's registry).
	kp("up", "-f", file, "--state-dir", state, "--no-kubeconfig-update")
	d, err := client.AppsV1().Deployments("default").Get(context.Background(), "demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != src+"/demo/app:v1" {
		t.Errorf("without the expansion demo names %s, want %s/demo/app:v1", got, src)
	}
	if got := motd("real-0"); got != "" {
		t.Errorf("without the expansion /etc/site/motd on real-0 = %q, want it gone", got)
	}
	if _, err := client.AppsV1().Deployments("site-system").Get(context.Background(), "site-operator", metav1.GetOptions{}); err == nil {
		t.Error("without the expansion the site operator is still deployed")
	}
}
