package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/runtime"
	"github.com/kubeplug/kubeplug/pkg/source"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// pkgs loads packages from name -> files, failing the test on any diagnostic.
func pkgs(t testing.TB, defs map[string]fstest.MapFS) *source.Index {
	t.Helper()
	var all []*plugin.Package
	for name, fsys := range defs {
		p, l := plugin.Load(fsys, plugin.OriginUser, "plugins/"+name)
		if l.HasFatal() {
			t.Fatalf("load %s:\n%s", name, l)
		}
		all = append(all, p)
	}
	idx, l := source.NewIndex(all)
	if l.HasFatal() {
		t.Fatal(l)
	}
	return idx
}

// manifest returns a package: plugin.yaml from body, then path/content pairs.
func manifest(body string, files ...string) fstest.MapFS {
	fsys := fstest.MapFS{"plugin.yaml": {Data: []byte("apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\n" + body)}}
	for i := 0; i+1 < len(files); i += 2 {
		fsys[files[i]] = &fstest.MapFile{Data: []byte(files[i+1])}
	}
	return fsys
}

func cluster(t testing.TB, enabled string) *config.Cluster {
	t.Helper()
	cl, l := config.Parse("cluster.yaml", []byte(`apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: test}
spec:
  kubernetesVersion: 1.36.3
  nodePools:
    - {name: workers, count: 2}
    - {name: edge, count: 1}
  plugins:
    enabled:
`+enabled))
	if l.HasFatal() {
		t.Fatal(l)
	}
	return cl
}

// The standard resolver is what action hands the engine; runtime does not import
// the engine, so the check is here.
var (
	_ engine.RuntimeResolver = (*runtime.Resolver)(nil)
	_ engine.PlanChecker     = (*runtime.Resolver)(nil)
)

// inProcess returns the standard resolver with rt registered in-process for the
// plugin name.
func inProcess(name string, rt stage.Runtime) *runtime.Resolver {
	return runtime.NewResolver(runtime.Options{InProcess: map[string]stage.Runtime{name: rt}})
}

func run(t testing.TB, cl *config.Cluster, idx *source.Index, opts engine.Options) (*engine.Plan, *engine.Result, diag.List) {
	t.Helper()
	e := engine.New(opts)
	plan, l := e.Plan(context.Background(), cl, idx)
	if plan == nil {
		return nil, nil, l
	}
	res, rl := e.Run(context.Background(), plan, stage.Validate)
	return plan, res, append(l, rl...)
}

func TestDeclarativeContributions(t *testing.T) {
	idx := pkgs(t, map[string]fstest.MapFS{
		"base": manifest(`metadata: {name: base, version: 1.0.0}
spec:
  values: {defaults: {issuer: dex.example.com, secret: s3cret}, sensitive: [/secret]}
  contributes:
    controlPlane:
      apiServer: {flags: {oidc-issuer-url: "https://{{ .Values.issuer }}", oidc-ca-file: "{{ .Values.ca | default \"\" }}"}}
    nodes:
      - roles: [worker]
        kubelet: {labels: {pool: "{{ .NodePool.Name }}", size: "{{ .Values.size | default \"m\" }}"}}
`),
		"app": manifest(`metadata: {name: app, version: 2.0.0}
spec:
  requires: [{name: base}]
  contributes:
    kubernetes:
      manifests: [manifests/]
`, "manifests/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: default}\ndata:\n  issuer: {{ .Plugins.base.Values.issuer }}\n  secret: {{ .Plugins.base.Values.secret | quote }}\n"),
	})
	cl := cluster(t, `      - {name: app}
      - name: base
        nodePools: [{name: edge, values: {size: xl}}, {name: workers}]
`)
	plan, res, l := run(t, cl, idx, engine.Options{})
	if l.HasFatal() {
		t.Fatal(l)
	}
	if got := strings.Join(plan.Names(), ","); got != "base,app" {
		t.Errorf("order = %s, want base,app", got)
	}
	m := res.Model
	flags := m.ControlPlane.Components[model.KubeAPIServer].Flags
	if f := flags["oidc-issuer-url"]; f.Value != "https://dex.example.com" || f.By != "base" {
		t.Errorf("oidc-issuer-url = %+v", f)
	}
	if _, ok := flags["oidc-ca-file"]; ok {
		t.Errorf("a flag that renders empty must be left out")
	}
	if got := m.Pools["edge"].Kubelet.Labels["size"].Value; got != "xl" {
		t.Errorf("edge size label = %q, want the pool's value xl", got)
	}
	if got := m.Pools["workers"].Kubelet.Labels["pool"].Value; got != "workers" {
		t.Errorf("workers pool label = %q", got)
	}
	if _, ok := m.Pools[model.ControlPlanePool].Kubelet.Labels["pool"]; ok {
		t.Errorf("a worker-role contribution reached the control plane")
	}
	if len(m.Kubernetes.Objects) != 1 {
		t.Fatalf("objects = %d, want 1", len(m.Kubernetes.Objects))
	}
	data := m.Kubernetes.Objects[0].Object["data"].(map[string]any)
	if data["issuer"] != "dex.example.com" || data["secret"] != "***" {
		t.Errorf("another plugin's values: issuer %v, secret %v (want the secret redacted)", data["issuer"], data["secret"])
	}
}

func TestConflictNamesBothPlugins(t *testing.T) {
	idx := pkgs(t, map[string]fstest.MapFS{
		"a": manifest("metadata: {name: a, version: 1.0.0}\nspec: {contributes: {controlPlane: {apiServer: {flags: {audit-log-maxage: \"7\"}}}}}\n"),
		"b": manifest("metadata: {name: b, version: 1.0.0}\nspec: {contributes: {controlPlane: {apiServer: {flags: {audit-log-maxage: \"30\"}}}}}\n"),
		"c": manifest("metadata: {name: c, version: 1.0.0}\nspec: {contributes: {controlPlane: {apiServer: {flags: {audit-log-maxage: \"7\"}}}}}\n"),
	})
	_, _, l := run(t, cluster(t, "      - {name: a}\n      - {name: b}\n      - {name: c}\n"), idx, engine.Options{})
	// Located at the second contribution's line, naming the first one's.
	want := "plugins/b/plugin.yaml:4:75: spec.contributes.controlPlane.apiServer.flags.audit-log-maxage: plugins a and b set controlPlane.kube-apiserver.flags.audit-log-maxage to different values (a sets it at plugins/a/plugin.yaml:4:75)"
	if got := l.Fatal().String(); got != want {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", got, want)
	}
}

func TestTemplateErrorPointsAtTheField(t *testing.T) {
	idx := pkgs(t, map[string]fstest.MapFS{
		"a": manifest("metadata: {name: a, version: 1.0.0}\nspec:\n  contributes:\n    controlPlane:\n      apiServer:\n        flags:\n          x: \"{{ required \\\"x is required\\\" .Values.missing }}\"\n"),
	})
	_, res, l := run(t, cluster(t, "      - {name: a}\n"), idx, engine.Options{})
	got := l.Fatal().String()
	if want := "plugins/a/plugin.yaml:9:14: spec.contributes.controlPlane.apiServer.flags.x: template: at <required \"x is required\" .Values.missing>: error calling required: x is required"; got != want {
		t.Errorf("diagnostic = %q", got)
	}
	if len(res.Stages) != 0 {
		t.Errorf("stages after a fatal initialise = %v, want none", res.Stages)
	}
}

func TestInProcessRuntimeSeesTheModel(t *testing.T) {
	idx := pkgs(t, map[string]fstest.MapFS{
		"base": manifest("metadata: {name: base, version: 1.0.0}\nspec: {contributes: {controlPlane: {apiServer: {flags: {v: \"2\"}}}}}\n"),
		"code": manifest("metadata: {name: code, version: 1.0.0}\nspec: {requires: [{name: base}]}\n"),
	})
	var stages []stage.Stage
	rt := stage.RuntimeFunc(func(_ context.Context, req *stage.Request) (*stage.Response, error) {
		stages = append(stages, req.Stage)
		if req.Stage != stage.Initialise {
			return nil, nil
		}
		v := req.Model.ControlPlane.Components[model.KubeAPIServer].Flags["v"].Value
		return &stage.Response{
			Contribution: &model.Contribution{Cloud: &model.Cloud{Outputs: map[string]model.Setting[any]{"verbosity": {Value: v}}}},
			Diagnostics:  diag.List{{Severity: diag.Warning, Message: "deprecated: use something else"}},
		}, nil
	})
	_, res, l := run(t, cluster(t, "      - {name: code}\n"), idx, engine.Options{Runtimes: inProcess("code", rt)})
	if l.HasFatal() {
		t.Fatal(l)
	}
	if got := res.Model.Cloud.Outputs["verbosity"]; got.Value != "2" || got.By != "code" {
		t.Errorf("output = %+v", got)
	}
	if w := l.Warnings().String(); w != "warning: plugin code: deprecated: use something else" {
		t.Errorf("warnings = %q", w)
	}
	if got := len(stages); got != 4 {
		t.Errorf("stages run = %v, want all four", stages)
	}
}

func TestResolveErrorIsFatal(t *testing.T) {
	idx := pkgs(t, map[string]fstest.MapFS{
		"a": manifest("metadata: {name: a, version: 1.0.0}\nspec: {requires: [{name: b}]}\n"),
		"b": manifest("metadata: {name: b, version: 1.0.0}\nspec: {requires: [{name: a}]}\n"),
	})
	_, _, l := run(t, cluster(t, "      - {name: a}\n"), idx, engine.Options{})
	if got := l.Fatal().String(); !strings.Contains(got, "cannot resolve plugins") || !strings.Contains(got, "a -> b") {
		t.Errorf("diagnostics = %q, want a cycle", got)
	}
}

// TestPlanFetchesOnlyPicked: the plan loads whole only the packages the resolver
// picked, fetched after resolution, so a broken package the cluster does not use
// (b 2.0.0, excluded by the constraint, and c) stops nothing, and a broken one it
// uses is a fatal diagnostic located in the package.
func TestPlanFetchesOnlyPicked(t *testing.T) {
	broken := "spec: {values: {schema: missing.json}}\n"
	fsys := fstest.MapFS{}
	for dir, body := range map[string]string{
		"a":   "metadata: {name: a, version: 1.0.0}\nspec: {requires: [{name: b, version: \"^1\"}]}\n",
		"b/1": "metadata: {name: b, version: 1.0.0}\nspec: {}\n",
		"b/2": "metadata: {name: b, version: 2.0.0}\n" + broken,
		"c":   "metadata: {name: c, version: 1.0.0}\n" + broken,
	} {
		fsys[dir+"/plugin.yaml"] = manifest(body)["plugin.yaml"]
	}
	idx, l := source.List(context.Background(), source.FS(plugin.OriginUser, fsys, "plugins"))
	if len(l) > 0 {
		t.Fatal(l)
	}
	plan, _, l := run(t, cluster(t, "      - {name: a}\n"), idx, engine.Options{})
	if plan == nil || len(l) > 0 {
		t.Fatalf("plan of a: %s", l)
	}
	if got := fmt.Sprint(plan.Names()); got != "[b a]" {
		t.Errorf("plan = %s", got)
	}
	// What each waits for rides along, from the resolver.
	if got := fmt.Sprint(plan.Plugins[0].After, plan.Plugins[1].After); got != "[] [b]" {
		t.Errorf("After of b, a = %s, want [] [b]", got)
	}
	plan, _, l = run(t, cluster(t, "      - {name: a}\n      - {name: c}\n"), idx, engine.Options{})
	want := `plugins/c/plugin.yaml:4:25: spec.values.schema: values schema "missing.json" does not exist in the package`
	if plan != nil || l.String() != want {
		t.Errorf("plan of a and c: %v\n%s\nwant\n%s", plan, l, want)
	}
}

// TestValidateHook: a caller interleaves its checks with the validate stage
// through RunWave — per wave, after the wave's plugins ran their own validate —
// and a fatal diagnostic from its checks stops the run before the next wave.
func TestValidateHook(t *testing.T) {
	idx := pkgs(t, map[string]fstest.MapFS{
		"base": manifest("metadata: {name: base, version: 1.0.0}\nspec: {}\n"),
		"code": manifest("metadata: {name: code, version: 1.0.0}\nspec: {requires: [{name: base}]}\n"),
	})
	var calls []string
	rt := stage.RuntimeFunc(func(_ context.Context, req *stage.Request) (*stage.Response, error) {
		if req.Stage == stage.Validate {
			calls = append(calls, "code validates itself")
		}
		return nil, nil
	})
	for _, failWave := range []int{-1, 0} {
		calls = nil
		e := engine.New(engine.Options{Runtimes: inProcess("code", rt)})
		checks := func(wave int, plugins []*engine.Planned) diag.List {
			calls = append(calls, fmt.Sprintf("checks of wave %d: %s", wave, plugins[0].Package.Name))
			if wave == failWave {
				return diag.List{{Severity: diag.Fatal, Plugin: plugins[0].Package.Name, Message: "validate check failed"}}
			}
			return nil
		}
		plan, l := e.Plan(context.Background(), cluster(t, "      - {name: code}\n"), idx)
		if plan == nil {
			t.Fatal(l)
		}
		res, l := e.Run(context.Background(), plan, stage.Deploy)
		if l.HasFatal() {
			t.Fatal(l)
		}
		validated := true
		for w := range plan.Waves {
			wl := e.RunWave(context.Background(), plan, stage.Validate, w, res.Model)
			l = append(l, wl...)
			if !wl.HasFatal() {
				wl = checks(w, plan.Waves[w])
				l = append(l, wl...)
			}
			if wl.HasFatal() {
				validated = false
				break
			}
		}
		want := []string{"checks of wave 0: base", "code validates itself", "checks of wave 1: code"}
		if failWave == 0 {
			want = want[:1]
			if !l.HasFatal() || validated {
				t.Errorf("a failing check: diagnostics %v, validated %v", l, validated)
			}
		} else if l.HasFatal() || !validated {
			t.Errorf("passing checks: diagnostics %v, validated %v", l, validated)
		}
		if !slices.Equal(calls, want) {
			t.Errorf("fail wave %d: calls %q, want %q", failWave, calls, want)
		}
	}
}

// shellPlugin returns a package whose exec runtime is a shell script, pinned by
// its digest.
func shellPlugin(name, body string) fstest.MapFS {
	src := "#!/bin/sh\n" + body
	sum := sha256.Sum256([]byte(src))
	fsys := manifest(fmt.Sprintf("metadata: {name: %s, version: 1.0.0}\nspec:\n  runtime: {type: exec, command: [bin/plugin], sha256: %s}\n", name, hex.EncodeToString(sum[:])))
	fsys["bin/plugin"] = &fstest.MapFile{Data: []byte(src), Mode: 0o755}
	return fsys
}

// TestEngineMakesFailuresFatalDiagnostics runs a crashing exec plugin through the
// engine with the standard resolver: the run goes on to report, the diagnostic
// names plugin and stage.
func TestEngineMakesFailuresFatalDiagnostics(t *testing.T) {
	idx := pkgs(t, map[string]fstest.MapFS{"sh": shellPlugin("sh", "echo 'cannot parse values' >&2\nexit 1\n")})
	rs := runtime.NewResolver(runtime.Options{})
	defer func() { _ = rs.Close() }()
	_, res, l := run(t, cluster(t, "      - {name: sh}\n"), idx, engine.Options{Runtimes: rs})
	want := "plugin sh: initialise stage failed: bin/plugin exited with status 1; stderr:\n    cannot parse values"
	if got := l.Fatal().String(); got != want {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", got, want)
	}
	if len(res.Stages) != 0 {
		t.Errorf("stages completed: %v", res.Stages)
	}
}

// TestRuntimeResolution: which runtimes a planned plugin gets, and where a
// plugin that cannot run is reported.
func TestRuntimeResolution(t *testing.T) {
	idx := pkgs(t, map[string]fstest.MapFS{
		"data": manifest("metadata: {name: data, version: 1.0.0}\nspec: {contributes: {controlPlane: {apiServer: {flags: {v: \"2\"}}}}}\n"),
		"sh":   shellPlugin("sh", "cat >/dev/null\necho '{\"protocolVersion\":\"kubeplug.dev/exec/v1\"}'\n"),
	})
	failing := engine.RuntimeResolverFunc(func(pkg *plugin.Package, _ []string) ([]stage.Runtime, error) {
		return nil, errors.New("spec.runtime.command: bin/plugin is not in the package")
	})
	silent := stage.RuntimeFunc(func(context.Context, *stage.Request) (*stage.Response, error) { return nil, nil })
	for _, tc := range []struct {
		name    string
		enabled string
		opts    engine.Options
		fatal   string
		warning string
	}{{
		name:    "no resolver runs declarative plugins",
		enabled: "      - {name: data}\n",
	}, {
		name:    "no resolver refuses plugin code, at spec.runtime",
		enabled: "      - {name: data}\n      - {name: sh}\n",
		fatal:   "plugins/sh/plugin.yaml:5:12: spec.runtime: plugin sh has a exec runtime, but this engine runs no plugin code",
	}, {
		name:    "a resolver error is located at spec.runtime",
		enabled: "      - {name: sh}\n",
		opts:    engine.Options{Runtimes: failing},
		fatal:   "plugins/sh/plugin.yaml:5:12: spec.runtime: plugin sh: spec.runtime.command: bin/plugin is not in the package",
	}, {
		name:    "the standard resolver runs declarative parts and code",
		enabled: "      - {name: data}\n      - {name: sh}\n",
		opts:    engine.Options{Runtimes: runtime.NewResolver(runtime.Options{})},
	}, {
		name:    "an in-process runtime for an unused plugin is a warning",
		enabled: "      - {name: data}\n",
		opts:    engine.Options{Runtimes: inProcess("audit", silent)},
		warning: "warning: an in-process runtime is registered for plugin audit, which the cluster does not use",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if c, ok := tc.opts.Runtimes.(io.Closer); ok {
				defer func() { _ = c.Close() }()
			}
			_, res, l := run(t, cluster(t, tc.enabled), idx, tc.opts)
			if got := l.Fatal().String(); got != tc.fatal {
				t.Fatalf("fatal diagnostics:\n%s\nwant:\n%s", got, tc.fatal)
			}
			if got := l.Warnings().String(); got != tc.warning {
				t.Errorf("warnings:\n%s\nwant:\n%s", got, tc.warning)
			}
			if tc.fatal != "" {
				return
			}
			// The declarative runtime ran, whichever resolver planned the plugin.
			if got := res.Model.ControlPlane.Components[model.KubeAPIServer].Flags["v"]; got.Value != "2" || got.By != "data" {
				t.Errorf("declarative flag = %+v", got)
			}
		})
	}
}
