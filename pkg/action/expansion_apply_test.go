package action_test

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/sign"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

func expansionRegistry(t *testing.T) (string, func()) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), srv.Close
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		fp := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fp, []byte(c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestApplyWithExpansion is the air gap on the test control plane: an expansion
// packed while a source registry answers is applied after that registry is
// stopped. Its image is pushed to the site registry and the live Deployment
// names it there; its installer hooks ran in order; its skipped step did not
// run; a second apply converges; an apply without it returns to the default.
func TestApplyWithExpansion(t *testing.T) {
	ctx := t.Context()
	src, stopSource := expansionRegistry(t)
	site, _ := expansionRegistry(t)
	img, err := random.Image(4096, 2)
	if err != nil {
		t.Fatal(err)
	}
	srcRef := src + "/team/web:v1"
	if err := remote.Write(mustRef(t, srcRef), img); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()

	dir := t.TempDir()
	hookLog := filepath.Join(dir, "hooks.log")
	writeTree(t, dir, map[string]string{
		"site/expansion.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Expansion
metadata: {name: site, version: 1.0.0}
spec:
  images: [` + srcRef + `]
  hooks:
  - {name: ready, at: controlPlaneReady, command: [sh, -c, 'echo "$KUBEPLUG_HOOK $KUBEPLUG_SITE_REGISTRY" >> ` + hookLog + `']}
  - {name: done, at: afterInstall, script: hooks/done.sh}
  skipSteps: [validate]
`,
		"site/hooks/done.sh": "#!/bin/sh\necho \"$KUBEPLUG_HOOK $KUBEPLUG_CLUSTER\" >> " + hookLog + "\n",
		"cluster/web/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: web, version: 0.1.0}
spec:
  contributes: {kubernetes: {manifests: [manifests/]}}
`,
		"cluster/web/manifests/web.yaml": `apiVersion: v1
kind: Namespace
metadata: {name: exp-web}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: exp-web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: ` + srcRef + `}]
`,
		"cluster/cluster.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: exp}
spec:
  kubernetesVersion: 1.37.1
  plugins:
    sources: [{dir: web}]
    enabled: [{name: web}]
`,
	})
	kp, err := sign.GenerateKeyPair(nil)
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"site.key": string(kp.Private), "site.pub": string(kp.Public)})

	cfg := &action.Config{Env: func(string) (string, bool) { return "", false }, NoBuiltin: true}
	create := action.NewExpansionCreate(cfg)
	create.Key = filepath.Join(dir, "site.key")
	if _, l := create.Run(ctx, filepath.Join(dir, "site/expansion.yaml"), nil, filepath.Join(dir, "exp/site.tar")); l.HasFatal() {
		t.Fatal(l)
	}
	stopSource() // the air gap

	cs := kubernetes.NewForConfigOrDie(testcluster.RESTConfig(t))
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), "exp-web", metav1.DeleteOptions{})
	})
	apply := func(use action.ExpansionUse) *action.ApplyResult {
		t.Helper()
		c := *cfg
		c.Expansions = use
		a := action.NewApply(&c)
		a.Target.RESTConfig = testcluster.RESTConfig(t)
		a.Timeout = 2 * time.Minute
		res, l := a.Run(ctx, load(t, filepath.Join(dir, "cluster/cluster.yaml")))
		if l.HasFatal() {
			t.Fatal(l)
		}
		return res
	}
	liveImage := func() string {
		t.Helper()
		d, err := cs.AppsV1().Deployments("exp-web").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec.Containers[0].Image
	}
	use := action.ExpansionUse{Dirs: []string{filepath.Join(dir, "exp")}, Keys: []string{filepath.Join(dir, "site.pub")}, SiteRegistry: site, SiteRegistryPlainHTTP: true}
	for range 2 { // the second run converges
		res := apply(use)
		if res.Validated {
			t.Error("validate ran, but the expansion skips it")
		}
		if got := liveImage(); got != site+"/team/web:v1" {
			t.Fatalf("live image %s, want the site registry's", got)
		}
	}
	desc, err := remote.Head(mustRef(t, site+"/team/web:v1"))
	if err != nil || desc.Digest != want {
		t.Fatalf("site registry: %v %v, want %s", desc, err, want)
	}
	b, _ := os.ReadFile(hookLog)
	wantLog := strings.Repeat("controlPlaneReady "+site+"\nafterInstall exp\n", 2)
	if string(b) != wantLog {
		t.Fatalf("hooks ran:\n%s\nwant:\n%s", b, wantLog)
	}

	// A dry run pushes nothing and runs no hook.
	{
		site2, _ := expansionRegistry(t)
		c := *cfg
		c.Expansions = use
		c.Expansions.SiteRegistry = site2
		a := action.NewApply(&c)
		a.Target.RESTConfig = testcluster.RESTConfig(t)
		a.DryRun = true
		if _, l := a.Run(ctx, load(t, filepath.Join(dir, "cluster/cluster.yaml"))); l.HasFatal() {
			t.Fatal(l)
		}
		if _, err := remote.Head(mustRef(t, site2+"/team/web:v1")); err == nil {
			t.Error("a dry run pushed the image")
		}
		if after, _ := os.ReadFile(hookLog); string(after) != wantLog {
			t.Errorf("a dry run ran the hooks:\n%s", after)
		}
	}

	// Without the expansion, the default again: the source's name, validated.
	if res := apply(action.ExpansionUse{}); !res.Validated {
		t.Error("validate did not run without the expansion")
	}
	if got := liveImage(); got != srcRef {
		t.Fatalf("without the expansion the live image is %s, want %s", got, srcRef)
	}
}

// TestApplyRewritesChartImages: a plugin's Helm chart, installed as a release
// through the Helm SDK, runs the images the expansion carries from the site
// registry: the rewrite reaches what Helm renders on the cluster (the
// post-renderer), not only render's files.
func TestApplyRewritesChartImages(t *testing.T) {
	ctx := t.Context()
	src, stopSource := expansionRegistry(t)
	site, _ := expansionRegistry(t)
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	srcRef := src + "/team/chart-app:v1"
	if err := remote.Write(mustRef(t, srcRef), img); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"site/expansion.yaml": "apiVersion: kubeplug.dev/v1alpha1\nkind: Expansion\nmetadata: {name: site, version: 1.0.0}\nspec: {skipSteps: [validate]}\n",
		"cluster/app/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: app, version: 0.1.0}
spec:
  contributes:
    kubernetes:
      manifests: [manifests/]
      helmReleases: [{name: app, chart: charts/app, namespace: exp-chart, values: {image: "` + srcRef + `"}}]
`,
		"cluster/app/manifests/ns.yaml":           "apiVersion: v1\nkind: Namespace\nmetadata: {name: exp-chart}\n",
		"cluster/app/charts/app/Chart.yaml":       "apiVersion: v2\nname: app\nversion: 0.1.0\n",
		"cluster/app/charts/app/values.yaml":      "image: none\n",
		"cluster/app/charts/app/templates/d.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app}\nspec:\n  selector: {matchLabels: {app: app}}\n  template:\n    metadata: {labels: {app: app}}\n    spec:\n      containers: [{name: app, image: '{{ .Values.image }}'}]\n",
		"cluster/cluster.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: exp}
spec:
  kubernetesVersion: 1.37.1
  plugins:
    sources: [{dir: app}]
    enabled: [{name: app}]
`,
	})
	cfg := &action.Config{Env: func(string) (string, bool) { return "", false }, NoBuiltin: true}
	if _, l := action.NewExpansionCreate(cfg).Run(ctx, filepath.Join(dir, "site/expansion.yaml"), load(t, filepath.Join(dir, "cluster/cluster.yaml")), filepath.Join(dir, "exp/site.tar")); l.HasFatal() {
		t.Fatal(l)
	}
	stopSource()

	cs := kubernetes.NewForConfigOrDie(testcluster.RESTConfig(t))
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), "exp-chart", metav1.DeleteOptions{})
	})
	c := *cfg
	c.Expansions = action.ExpansionUse{Dirs: []string{filepath.Join(dir, "exp")}, SiteRegistry: site, SiteRegistryPlainHTTP: true}
	a := action.NewApply(&c)
	a.Target.RESTConfig = testcluster.RESTConfig(t)
	a.Timeout = 2 * time.Minute
	if _, l := a.Run(ctx, load(t, filepath.Join(dir, "cluster/cluster.yaml"))); l.HasFatal() {
		t.Fatal(l)
	}
	d, err := cs.AppsV1().Deployments("exp-chart").Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Spec.Template.Spec.Containers[0].Image, site+"/team/chart-app:v1"; got != want {
		t.Fatalf("the chart's live Deployment runs %s, want %s", got, want)
	}
	if _, err := remote.Head(mustRef(t, site+"/team/chart-app:v1")); err != nil {
		t.Fatalf("the chart's image is not in the site registry: %v", err)
	}
}
