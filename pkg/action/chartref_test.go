package action_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	helmregistry "helm.sh/helm/v4/pkg/registry"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/lock"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// chartTemplate renders the chart's version, its values' types and a list.
const chartTemplate = `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}}
data:
  version: {{ .Chart.Version | quote }}
  args: {{ join "," .Values.args | quote }}
  replicasKind: {{ kindOf .Values.replicas | quote }}
  message: {{ .Values.message | quote }}
`

// packChart writes chart name at version (with template tmpl) as NAME-VERSION.tgz
// into dir, as helm package does, and returns its path.
func packChart(t *testing.T, dir, name, version, tmpl string) string {
	t.Helper()
	c, err := loader.LoadFiles([]*archive.BufferedFile{
		{Name: "Chart.yaml", Data: fmt.Appendf(nil, "apiVersion: v2\nname: %s\nversion: %s\n", name, version)},
		{Name: "values.yaml", Data: []byte("args: []\nreplicas: 1\nmessage: default\n")},
		{Name: "templates/cm.yaml", Data: []byte(tmpl)},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := chartutil.Save(c, dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// helmRepository serves dir as a Helm repository (helm repo index) on loopback.
func helmRepository(t *testing.T, dir string) string {
	t.Helper()
	web := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(web.Close)
	reindex(t, dir, web.URL)
	return web.URL
}

func reindex(t *testing.T, dir, url string) {
	t.Helper()
	idx, err := repo.IndexDirectory(dir, url)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ociCharts starts a loopback registry and returns its host and a Helm
// registry client pushing to it, as `helm push` does.
func ociCharts(t *testing.T) (string, func(tgz string)) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	c, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptWriter(io.Discard),
		helmregistry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")))
	if err != nil {
		t.Fatal(err)
	}
	return host, func(tgz string) {
		t.Helper()
		data, err := os.ReadFile(tgz)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := loader.LoadArchive(strings.NewReader(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Push(data, host+"/charts/"+ch.Name()+":"+ch.Metadata.Version); err != nil {
			t.Fatal(err)
		}
	}
}

// writeChartUser writes a plugin whose release names its chart by reference
// (release is the YAML of the release's chart, repo and version fields) and a
// cluster enabling it with a list and a number; it returns the cluster file.
func writeChartUser(t *testing.T, work, release string) string {
	t.Helper()
	writePlugin(t, filepath.Join(work, "plugins"), "web", "1.0.0", `
  contributes:
    kubernetes:
      helmReleases:
        - {name: web, namespace: web, `+release+`, valuesFiles: [values.yaml], values: {args: {fromValue: /args}, replicas: {fromValue: /replicas}}}`)
	if err := os.WriteFile(filepath.Join(work, "plugins", "web-1.0.0", "values.yaml"), []byte("message: from-values-file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(work, "cluster.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: charts}
spec:
  kubernetesVersion: 1.33.0
  provider: {local: {}}
  plugins:
    sources: [{dir: ./plugins}]
    enabled:
      - name: web
        values: {args: [--a, --b], replicas: 3}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// renderedConfigMap renders file and returns the release's ConfigMap as written.
func renderedConfigMap(t *testing.T, cfg *action.Config, file string) (string, string) {
	t.Helper()
	files, l := action.NewRender(cfg).Files(context.Background(), load(t, file))
	if l.HasFatal() {
		return "", l.String()
	}
	for name, b := range files {
		if strings.HasPrefix(name, "kubernetes/") && strings.Contains(string(b), "kind: ConfigMap") {
			return string(b), ""
		}
	}
	return "", fmt.Sprintf("no ConfigMap in %d files", len(files))
}

// TestChartByReference renders a plugin whose release names its chart by
// reference — an OCI chart and a chart of a Helm repository, both served on
// loopback — with a values file, a list and a number reaching the chart typed;
// kubeplug lock pins the chart's version and digest, the pin is preferred over
// a newer version and served from the cache, and --locked (and any run) refuses
// a chart whose archive changed under the pinned version.
func TestChartByReference(t *testing.T) {
	dist := t.TempDir()
	host, push := ociCharts(t)
	v1 := packChart(t, dist, "web", "1.0.0", chartTemplate)
	push(v1)
	repoURL := helmRepository(t, dist)

	for _, tc := range []struct {
		name, release, key string
	}{
		{"oci", fmt.Sprintf("chart: oci://%s/charts/web, version: 1.x", host), "oci://" + host + "/charts/web"},
		{"helm repository", fmt.Sprintf("repo: %s, chart: web, version: '>=1.0.0 <2'", repoURL), repoURL + "/web"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			work := t.TempDir()
			file := writeChartUser(t, work, tc.release)
			cfg := &action.Config{NoBuiltin: true}
			cm, errs := renderedConfigMap(t, cfg, file)
			if errs != "" {
				t.Fatal(errs)
			}
			for _, want := range []string{`version: 1.0.0`, `args: --a,--b`, `replicasKind: float64`, `message: from-values-file`} {
				if !strings.Contains(cm, want) {
					t.Errorf("the chart's ConfigMap lacks %q:\n%s", want, cm)
				}
			}

			// kubeplug lock pins the chart beside the plugin.
			if _, l := action.NewLock(cfg).Run(context.Background(), load(t, file)); l.HasFatal() {
				t.Fatal(l)
			}
			lf, err := lock.Read(lock.PathFor(file))
			if err != nil {
				t.Fatal(err)
			}
			pin, ok := lf.Chart("web", tc.key)
			if !ok || pin.Version != "1.0.0" || !strings.HasPrefix(pin.Digest, "sha256:") {
				t.Fatalf("lock pins %+v (found %v), want %s 1.0.0 with its digest", pin, ok, tc.key)
			}
			if _, l := action.NewPlan(&action.Config{NoBuiltin: true, Locked: true}).Run(context.Background(), load(t, file)); l.HasFatal() {
				t.Fatalf("plan --locked with the lock just written: %v", l)
			}

			// A newer version is published: the pin holds; --update takes it,
			// which --locked refuses as a change of the lock file.
			dist2 := t.TempDir()
			v11 := packChart(t, dist2, "web", "1.1.0", chartTemplate)
			if tc.name == "oci" {
				push(v11)
			} else {
				copyFile(t, v11, filepath.Join(dist, "web-1.1.0.tgz"))
				reindex(t, dist, repoURL)
				t.Cleanup(func() { _ = os.Remove(filepath.Join(dist, "web-1.1.0.tgz")); reindex(t, dist, repoURL) })
			}
			if cm, errs := renderedConfigMap(t, cfg, file); errs != "" || !strings.Contains(cm, "version: 1.0.0") {
				t.Fatalf("render with a newer chart published: want the pinned 1.0.0: %s%s", errs, cm)
			}
			if cm, errs := renderedConfigMap(t, &action.Config{NoBuiltin: true, Update: []string{"web"}}, file); errs != "" || !strings.Contains(cm, "version: 1.1.0") {
				t.Fatalf("render --update web: want 1.1.0: %s%s", errs, cm)
			}
			_, l := action.NewPlan(&action.Config{NoBuiltin: true, Locked: true, Update: []string{"web"}}).Run(context.Background(), load(t, file))
			if msg := l.String(); !strings.Contains(msg, "the lock file would change (--locked): plugin web: chart "+tc.key+" resolves to 1.1.0") {
				t.Fatalf("plan --locked --update web: %s", msg)
			}

			// The pinned version's archive changes upstream (and the cache is
			// cold): refused naming both digests, with and without --locked.
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			changed := packChart(t, t.TempDir(), "web", "1.0.0", chartTemplate+"  extra: changed\n")
			if tc.name == "oci" {
				push(changed)
			} else {
				copyFile(t, changed, filepath.Join(dist, "web-1.0.0.tgz"))
				reindex(t, dist, repoURL)
				t.Cleanup(func() { copyFile(t, v1, filepath.Join(dist, "web-1.0.0.tgz")); reindex(t, dist, repoURL) })
			}
			for _, locked := range []bool{false, true} {
				_, l := action.NewPlan(&action.Config{NoBuiltin: true, Locked: locked}).Run(context.Background(), load(t, file))
				if msg := l.String(); !strings.Contains(msg, "plugin web: chart web 1.0.0 from ") || !strings.Contains(msg, "but kubeplug.lock pins "+pin.Digest) ||
					!strings.Contains(msg, "the chart changed under the same version") {
					t.Errorf("plan (locked %v) with the pinned chart changed: %s", locked, msg)
				}
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestApplyChartByReferenceFaultInstallsNothing applies a plugin whose release
// names a chart in a repository that is down, beside a manifest of its own:
// the apply fails naming chart, version and repository before anything is
// applied — neither the manifest's object nor a release record is in the
// cluster.
func TestApplyChartByReferenceFaultInstallsNothing(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx := context.Background()
	name := fmt.Sprintf("downref-%d", time.Now().UnixNano()%1_000_000)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	work := t.TempDir()
	dir := writePlugin(t, filepath.Join(work, "plugins"), name, "1.0.0", fmt.Sprintf(`
  contributes:
    kubernetes:
      manifests: [cm.yaml]
      helmReleases:
        - {namespace: default, repo: %s, chart: web, version: 1.x}`, down.URL))
	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: default}\n", name), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(work, "cluster.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: downref}\nspec:\n  kubernetesVersion: 1.37.1\n  plugins:\n    sources: [{dir: ./plugins}]\n    enabled: [{name: %s}]\n", name), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &action.Config{NoBuiltin: true}
	a := action.NewApply(cfg)
	a.Target.RESTConfig = testcluster.RESTConfig(t)
	a.Timeout = time.Minute
	_, l := a.Run(ctx, load(t, file))
	if msg := l.String(); !l.HasFatal() || !strings.Contains(msg, "chart web 1.x from "+down.URL) || !strings.Contains(msg, "cannot read the Helm repository index") {
		t.Fatalf("apply with the chart's repository down: %s", msg)
	}
	if _, err := testcluster.Client(t).CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the plugin's ConfigMap was applied (err %v)", err)
	}
	st := action.NewStatus(cfg)
	st.Target.RESTConfig = testcluster.RESTConfig(t)
	plugins, sl := st.Run(ctx)
	if sl.HasFatal() {
		t.Fatal(sl)
	}
	for _, p := range plugins {
		if p.Plugin == name {
			t.Errorf("plugin %s has a release record: %+v", name, p)
		}
	}
	secrets, err := testcluster.Client(t).CoreV1().Secrets("default").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	if err != nil || len(secrets.Items) != 0 {
		t.Errorf("Helm release records: %d, %v", len(secrets.Items), err)
	}
}

// TestChartByReferenceCredentials: a chart by reference in a Helm repository
// that asks for a password is read with the credentials of the cluster's
// catalog source for the same repository (as that catalog is read, user:
// password@ in its URL), which a plugin's repo never carries; without such a
// source the 401 is an error naming chart, version and repository, and the
// password is never printed.
func TestChartByReferenceCredentials(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dist := t.TempDir()
	packChart(t, dist, "web", "1.0.0", chartTemplate)
	files := http.FileServer(http.Dir(dist))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "hunter2" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()
	reindex(t, dist, srv.URL)
	work := t.TempDir()
	file := writeChartUser(t, work, fmt.Sprintf("repo: %s, chart: web, version: 1.x", srv.URL))
	cm, errs := renderedConfigMap(t, &action.Config{NoBuiltin: true}, file)
	if !strings.Contains(errs, "chart web 1.x from "+srv.URL) || !strings.Contains(errs, "401") || cm != "" {
		t.Fatalf("render without credentials: %s%s", errs, cm)
	}
	withCreds := strings.Replace(srv.URL, "http://", "http://alice:hunter2@", 1)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "sources: [{dir: ./plugins}]", "sources: [{dir: ./plugins}, {catalog: '"+withCreds+"', type: helm}]", 1))
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cm, errs = renderedConfigMap(t, &action.Config{NoBuiltin: true}, file)
	if errs != "" || !strings.Contains(cm, "version: 1.0.0") {
		t.Fatalf("render with the source's credentials: %s%s", errs, cm)
	}
	if strings.Contains(cm, "hunter2") {
		t.Error("the password is in render's output")
	}
}

// TestLockedStaleChartPin: a chart pin that no release uses any more (the
// release dropped from the plugin) is a change of the lock file, which
// --locked refuses naming it.
func TestLockedStaleChartPin(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dist := t.TempDir()
	packChart(t, dist, "web", "1.0.0", chartTemplate)
	repoURL := helmRepository(t, dist)
	work := t.TempDir()
	file := writeChartUser(t, work, fmt.Sprintf("repo: %s, chart: web, version: 1.x", repoURL))
	if _, l := action.NewLock(&action.Config{NoBuiltin: true}).Run(context.Background(), load(t, file)); l.HasFatal() {
		t.Fatal(l)
	}
	// Version 1.0.0 of the plugin changes in place, dropping its release: the
	// package digest changes too, so pin that anew but keep the chart pin.
	writePlugin(t, filepath.Join(work, "plugins"), "web", "1.0.0", `{}`)
	lf, err := lock.Read(lock.PathFor(file))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(lock.PathFor(file)); err != nil {
		t.Fatal(err)
	}
	doc, l := action.NewPlan(&action.Config{NoBuiltin: true}).Run(context.Background(), load(t, file))
	if doc == nil {
		t.Fatal(l)
	}
	lf.Plugins[0].Digest = doc.Plugins[0].Digest
	if err := lf.Write(lock.PathFor(file)); err != nil {
		t.Fatal(err)
	}
	for _, run := range []func() string{
		func() string {
			_, l := action.NewPlan(&action.Config{NoBuiltin: true, Locked: true}).Run(context.Background(), load(t, file))
			return l.String()
		},
		func() string {
			_, l := action.NewRender(&action.Config{NoBuiltin: true, Locked: true}).Files(context.Background(), load(t, file))
			return l.String()
		},
	} {
		if msg := run(); !strings.Contains(msg, "the lock file would change (--locked): plugin web: chart "+repoURL+"/web 1.0.0 would be removed") {
			t.Errorf("--locked with a stale chart pin: %s", msg)
		}
	}
}
