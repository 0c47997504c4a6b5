package action_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/cli/values"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/action"
)

var updateParity = flag.Bool("update-parity", false, "rewrite testdata/parity/differences.golden")

// parityVersion is the Kubernetes version both sides render for.
const parityVersion = "1.33.0"

// parityCases are the real public charts of testdata/parity (see its README.md),
// each with values files of its own and typed values from cluster.yaml.
var parityCases = []struct {
	name, chart string
	files       []string
	values      string // JSON, as helm template --set-json takes it and cluster.yaml gives it
}{
	{name: "podinfo", chart: "podinfo", values: `{"replicaCount": 2, "ui": {"message": "hello"}}`},
	{name: "podinfo-prod", chart: "podinfo", files: []string{"values-prod.yaml"}, values: `{"hpa": {"enabled": true, "maxReplicas": 5}}`},
	{name: "metrics-server", chart: "metrics-server", files: []string{"ci/ci-values.yaml"}, values: `{"replicas": 2, "args": ["--kubelet-insecure-tls", "--v=2"]}`},
	{name: "metrics-server-tls-helm", chart: "metrics-server", files: []string{"ci/tls-helm-values.yaml"}, values: `{}`},
}

// TestHelmTemplateParity renders real public charts — served from a loopback
// Helm repository, fetched by kubeplug's own chart fetching as charts by
// reference, with values files and typed values — through kubeplug render, and
// the same charts with the Helm SDK's template action (as `helm template -f FILE
// --set-json VALUES --include-crds --kube-version`), and compares the objects.
// The differences are the golden testdata/parity/differences.golden, each a
// documented one (docs/helm.md, "helm template parity"); a new difference fails
// the test. Update with -update-parity.
func TestHelmTemplateParity(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	root, err := filepath.Abs("testdata/parity")
	if err != nil {
		t.Fatal(err)
	}
	dist := t.TempDir()
	versions := map[string]string{}
	for _, c := range []string{"podinfo", "metrics-server"} {
		ch, err := loader.LoadDir(filepath.Join(root, c))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := chartutil.Save(ch, dist); err != nil {
			t.Fatal(err)
		}
		versions[c] = ch.Metadata.Version
	}
	repoURL := helmRepository(t, dist)

	var report bytes.Buffer
	for _, tc := range parityCases {
		ns := tc.name
		helm := helmTemplate(t, filepath.Join(root, tc.chart), tc.name, ns, tc.files, tc.values)
		ours := kubeplugTemplate(t, repoURL, root, tc.chart, versions[tc.chart], tc.name, ns, tc.files, tc.values)
		for _, line := range compareObjects(helm, ours) {
			fmt.Fprintf(&report, "%s: %s\n", tc.name, line)
		}
	}
	checkParityGolden(t, filepath.Join(root, "differences.golden"), report.Bytes())
}

// checkParityGolden compares the differences between kubeplug's render and
// helm template with the golden file that documents them (-update-parity
// rewrites it).
func checkParityGolden(t *testing.T, golden string, report []byte) {
	t.Helper()
	if *updateParity {
		if err := os.WriteFile(golden, report, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, report) {
		t.Errorf("kubeplug render and helm template differ otherwise than %s says (-update-parity rewrites it):\n%s", golden, report)
	}
}

// object is a rendered object and whether Helm made it as a hook.
type object struct {
	obj  map[string]any
	hook string // the hook events, "" for the manifest's objects
}

// helmTemplate renders chart as `helm template` does, through the Helm SDK.
func helmTemplate(t *testing.T, chart, release, ns string, files []string, jsonValues string) map[string]object {
	t.Helper()
	ch, err := loader.LoadDir(chart)
	if err != nil {
		t.Fatal(err)
	}
	opts := values.Options{JSONValues: []string{jsonValues}}
	for _, f := range files {
		opts.ValueFiles = append(opts.ValueFiles, filepath.Join(chart, f))
	}
	vals, err := opts.MergeValues(nil)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := common.ParseKubeVersion("v" + parityVersion)
	if err != nil {
		t.Fatal(err)
	}
	cfg := helmaction.NewConfiguration(helmaction.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	in := helmaction.NewInstall(cfg)
	in.DryRunStrategy = helmaction.DryRunClient
	in.ReleaseName, in.Namespace, in.Replace, in.IncludeCRDs, in.KubeVersion = release, ns, true, true, kv
	reli, err := in.RunWithContext(context.Background(), ch, vals)
	if err != nil {
		t.Fatalf("helm template %s: %v", release, err)
	}
	rel := reli.(*releasev1.Release)
	out := map[string]object{}
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		addObject(t, out, doc, "")
	}
	for _, h := range rel.Hooks {
		var events []string
		for _, e := range h.Events {
			events = append(events, string(e))
		}
		addObject(t, out, h.Manifest, strings.Join(events, ","))
	}
	return out
}

// kubeplugTemplate renders chart through kubeplug render: a plugin whose
// release names it by reference in the loopback repository, with the values
// files in the plugin's package and the values from cluster.yaml.
func kubeplugTemplate(t *testing.T, repoURL, root, chart, version, release, ns string, files []string, jsonValues string) map[string]object {
	t.Helper()
	work := t.TempDir()
	pdir := filepath.Join(work, "plugins", release)
	vfiles := []string{}
	for i, f := range files {
		b, err := os.ReadFile(filepath.Join(root, chart, f))
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("values-%d.yaml", i)
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pdir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		vfiles = append(vfiles, name)
	}
	vf, _ := json.Marshal(vfiles)
	writePluginAt(t, pdir, release, fmt.Sprintf(`{contributes: {kubernetes: {helmReleases: [{name: %s, namespace: %s, repo: %q, chart: %s, version: %q, valuesFiles: %s, values: {fromValue: ""}}]}}}`,
		release, ns, repoURL, chart, version, vf))
	file := filepath.Join(work, "cluster.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: parity}
spec:
  kubernetesVersion: %s
  provider: {local: {}}
  plugins:
    sources: [{dir: ./plugins}]
    enabled: [{name: %s, values: %s}]
`, parityVersion, release, jsonValues), 0o644); err != nil {
		t.Fatal(err)
	}
	rendered, l := action.NewRender(&action.Config{NoBuiltin: true}).Files(context.Background(), load(t, file))
	if l.HasFatal() {
		t.Fatalf("kubeplug render %s: %v", release, l)
	}
	out := map[string]object{}
	for name, b := range rendered {
		if !strings.HasPrefix(name, "kubernetes/") {
			continue
		}
		for doc := range strings.SplitSeq(string(b), "\n---\n") {
			hook := ""
			if strings.Contains(doc, "# Source: helm release "+ns+"/"+release+", hook ") {
				hook = "hook"
			}
			addObject(t, out, doc, hook)
		}
	}
	return out
}

// writePluginAt writes plugin.yaml of plugin name 1.0.0 with spec into dir.
func writePluginAt(t *testing.T, dir, name, spec string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := fmt.Sprintf("apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: %s, version: 1.0.0}\nspec: %s\n", name, spec)
	if err := os.WriteFile(filepath.Join(dir, "plugin.yaml"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
}

func addObject(t *testing.T, out map[string]object, doc, hook string) {
	t.Helper()
	var o map[string]any
	if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
		t.Fatalf("parsing %q: %v", doc, err)
	}
	if o == nil {
		return
	}
	md, _ := o["metadata"].(map[string]any)
	key := fmt.Sprintf("%v/%v", o["kind"], md["name"])
	out[key] = object{obj: o, hook: hook}
}

// compareObjects lists how ours differs from helm's, sorted: objects only on
// one side, and per object the JSON pointers whose values differ (values are
// not shown: generated keys differ on every run).
func compareObjects(helm, ours map[string]object) []string {
	var out []string
	tests := 0
	for k, h := range helm {
		o, ok := ours[k]
		switch {
		case !ok && slices.Contains(strings.Split(h.hook, ","), string(releasev1.HookTest)):
			tests++ // their names are random (randAlpha): counted, not listed
			continue
		case !ok:
			what := "only in helm template"
			if h.hook != "" {
				what += " (hook " + h.hook + ")"
			}
			out = append(out, k+": "+what)
			continue
		}
		for _, p := range diffPaths("", h.obj, o.obj) {
			out = append(out, k+": "+p)
		}
	}
	for k := range ours {
		if _, ok := helm[k]; !ok {
			out = append(out, k+": only in kubeplug render")
		}
	}
	sort.Strings(out)
	if tests > 0 {
		out = append(out, fmt.Sprintf("%d test hooks only in helm template", tests))
	}
	return out
}

// diffPaths lists where a and b differ: "PATH added", "PATH removed", "PATH differs".
func diffPaths(ptr string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range keys {
				if !yield(k) {
					return
				}
			}
		}) {
			p := ptr + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			av, ain := am[k]
			bv, bin := bm[k]
			switch {
			case !ain:
				out = append(out, p+" added")
			case !bin:
				out = append(out, p+" removed")
			default:
				out = append(out, diffPaths(p, av, bv)...)
			}
		}
		return out
	}
	if !reflect.DeepEqual(a, b) {
		return []string{ptr + " differs"}
	}
	return nil
}
