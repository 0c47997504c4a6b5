// Package plugins_test builds and runs the example plugins the way kubeplug does.
package plugins_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/runtime"
	"github.com/kubeplug/kubeplug/pkg/source"
	"github.com/kubeplug/kubeplug/pkg/stage"
	"github.com/kubeplug/kubeplug/sdk"
	"github.com/kubeplug/kubeplug/sdk/sdktest"
)

// clusterFile writes a cluster file that enables plugin from dir.
func clusterFile(t *testing.T, dir, name, values string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	body := `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: example}
spec:
  kubernetesVersion: 1.36.3
  nodePools: [{name: workers, count: 1}]
  plugins:
    sources: [{dir: ` + abs + `}]
    enabled:
      - {name: ` + name + `, values: {` + values + `}}
`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// apiServerFlags renders the model of the cluster file through the action layer,
// as `kubeplug render --stage initialise` does, and returns the API server flags.
func apiServerFlags(t *testing.T, cluster string) map[string]model.Setting[string] {
	t.Helper()
	r := action.NewRender(&action.Config{NoBuiltin: true})
	r.Stage = stage.Initialise
	cl, l := config.Load(cluster)
	if cl == nil {
		t.Fatal(l)
	}
	files, fl := r.Files(t.Context(), cl)
	l = append(l, fl...)
	if l.HasFatal() {
		t.Fatal(l)
	}
	var m model.Model
	if err := json.Unmarshal(files["model.json"], &m); err != nil {
		t.Fatal(err)
	}
	return m.ControlPlane.Components[model.KubeAPIServer].Flags
}

func TestExecShellDigestIsCurrent(t *testing.T) {
	b, err := os.ReadFile("exec-shell/plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`sha256: ([0-9a-f]{64})`).FindSubmatch(b)
	if m == nil {
		t.Fatal("exec-shell/plugin.yaml pins no sha256")
	}
	if got := sdktest.Digest(t, "exec-shell/bin/plugin.sh"); got != string(m[1]) {
		t.Errorf("exec-shell/plugin.yaml pins sha256 %s, but bin/plugin.sh has %s: update plugin.yaml", m[1], got)
	}
}

func TestExecShell(t *testing.T) {
	flags := apiServerFlags(t, clusterFile(t, "exec-shell", "exec-shell", ""))
	if f := flags["audit-log-maxage"]; f.Value != "30" || f.By != "exec-shell" {
		t.Errorf("audit-log-maxage = %+v", f)
	}
	// Stages it does not implement are empty answers, not errors.
	if resp := sdktest.RunStage(t, "exec-shell", &sdk.Request{Stage: stage.Validate}); resp != nil {
		t.Errorf("validate answered %+v, want nothing", resp)
	}
}

func TestGRPCGo(t *testing.T) {
	dir := sdktest.Package(t, "grpc-go")
	flags := apiServerFlags(t, clusterFile(t, dir, "grpc-go", "maxRequestsInflight: 1200"))
	if f := flags["max-requests-inflight"]; f.Value != "1200" || f.By != "grpc-go" {
		t.Errorf("max-requests-inflight = %+v", f)
	}

	// Every stage of one run against one process, through the engine as a
	// library user would drive it.
	cl, l := config.Load(clusterFile(t, dir, "grpc-go", ""))
	if l.HasFatal() {
		t.Fatal(l)
	}
	idx, l := source.List(t.Context(), source.Dir(plugin.OriginUser, dir))
	if l.HasFatal() {
		t.Fatal(l)
	}
	rs := runtime.NewResolver(runtime.Options{})
	defer rs.Close()
	e := engine.New(engine.Options{Runtimes: rs})
	plan, l := e.Plan(t.Context(), cl, idx)
	if plan == nil {
		t.Fatal(l)
	}
	res, l := e.Run(t.Context(), plan, stage.Validate)
	if len(l) > 0 {
		t.Errorf("diagnostics: %s", l)
	}
	if got := res.Model.ControlPlane.Components[model.KubeAPIServer].Flags["max-requests-inflight"].Value; got != "800" {
		t.Errorf("max-requests-inflight = %q, want the default 800", got)
	}
	if len(res.Stages) != len(stage.Stages) {
		t.Errorf("stages = %v", res.Stages)
	}
}

func TestGRPCGoRefusesBadValues(t *testing.T) {
	dir := sdktest.Package(t, "grpc-go")
	resp := sdktest.RunStage(t, dir, &sdk.Request{Values: map[string]any{"maxRequestsInflight": "many"}})
	if len(resp.Diagnostics) != 1 || !strings.Contains(resp.Diagnostics[0].String(), "values.maxRequestsInflight: expected a positive number, found many") {
		t.Errorf("diagnostics = %v", resp.Diagnostics)
	}
	// The binary alone, without its package, is run as a grpc plugin.
	resp = sdktest.RunStage(t, filepath.Join(dir, "bin/plugin"), &sdk.Request{Values: map[string]any{"maxRequestsInflight": 5}})
	if resp.Contribution == nil {
		t.Errorf("no contribution")
	}
}
