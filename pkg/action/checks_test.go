package action_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// checksPlugin writes a cluster file enabling a plugin "probe" whose ConfigMap
// carries values.mode, and whose validate checks wait for the ConfigMap, want its
// mode "on", and run a script from the package.
func checksPlugin(t *testing.T, ns, mode string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"cluster.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: checks}
spec:
  kubernetesVersion: 1.37.1
  plugins:
    sources: [{dir: ./plugins}]
    enabled:
      - name: probe
        values: {mode: ` + mode + `}
`,
		"plugins/probe/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: probe, version: 1.0.0}
spec:
  values: {defaults: {mode: "on"}}
  contributes: {kubernetes: {manifests: [manifests/]}}
  validate:
    - wait: {apiVersion: v1, kind: ConfigMap, namespace: ` + ns + `, name: probe}
    - name: mode-on
      expression: {kind: ConfigMap, namespace: ` + ns + `, name: probe, expression: 'object.data.mode == "on"', timeout: 1s}
    - exec: {command: [bin/check.sh]}
`,
		"plugins/probe/manifests/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: probe, namespace: ` + ns + `}
data:
  mode: {{ .Values.mode | quote }}
`,
		// The script sees the run's plugin, cluster and a kubeconfig.
		"plugins/probe/bin/check.sh": "#!/bin/sh\n[ \"$KUBEPLUG_PLUGIN/$KUBEPLUG_CLUSTER\" = probe/checks ] && grep -q 'server: ' \"$KUBECONFIG\"\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "cluster.yaml")
}

// TestApplyRunsValidateChecks: an apply runs the plugins' checks after deploying
// them and reports each; a failing check is a fatal diagnostic naming the plugin
// and the check, and the apply is not validated.
func TestApplyRunsValidateChecks(t *testing.T) {
	ns := testcluster.Namespace(t)
	apply := action.NewApply(&action.Config{NoBuiltin: true, Env: func(string) (string, bool) { return "", false }})
	apply.Target.RESTConfig = testcluster.RESTConfig(t)
	apply.Timeout = time.Minute

	res, l := apply.Run(t.Context(), load(t, checksPlugin(t, ns, "on")))
	if l.HasFatal() {
		t.Fatal(l)
	}
	if !res.Validated || len(res.Checks) != 3 {
		t.Fatalf("validated %v, checks %+v", res.Validated, res.Checks)
	}
	for i, name := range []string{"wait ConfigMap/" + ns + "/probe", "mode-on", "exec bin/check.sh"} {
		if c := res.Checks[i]; c.Plugin != "probe" || c.Name != name || !c.OK {
			t.Errorf("check %d = %+v, want %s passed", i, c, name)
		}
	}

	res, l = apply.Run(t.Context(), load(t, checksPlugin(t, ns, "off")))
	if res == nil || res.Validated || len(res.Checks) != 3 || res.Checks[1].OK || !res.Checks[0].OK || !res.Checks[2].OK {
		t.Fatalf("failing check: result %+v", res)
	}
	want := `plugin probe: validate check "mode-on": expression object.data.mode == "on" is false after 1s: ConfigMap ` + ns + `/probe`
	if f := l.Fatal(); len(f) != 1 || !strings.Contains(f[0].String(), want) {
		t.Errorf("diagnostics:\n%s\nwant one fatal containing:\n%s", l, want)
	}
}

// TestExecCheckPinned: an exec check's sha256 pins the bytes that run; a script
// changed after the pin was written fails the check instead of running.
func TestExecCheckPinned(t *testing.T) {
	ns := testcluster.Namespace(t)
	file := checksPlugin(t, ns, "on")
	manifest := filepath.Join(filepath.Dir(file), "plugins", "probe", "plugin.yaml")
	text, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	pinned := strings.Replace(string(text), "exec: {command: [bin/check.sh]}", "exec: {command: [bin/check.sh], sha256: '"+strings.Repeat("0", 64)+"'}", 1)
	if pinned == string(text) {
		t.Fatal("the fixture has no exec check to pin")
	}
	if err := os.WriteFile(manifest, []byte(pinned), 0o644); err != nil {
		t.Fatal(err)
	}
	apply := action.NewApply(&action.Config{NoBuiltin: true, Env: func(string) (string, bool) { return "", false }})
	apply.Target.RESTConfig = testcluster.RESTConfig(t)
	apply.Timeout = time.Minute
	res, l := apply.Run(t.Context(), load(t, file))
	if res == nil || res.Validated || len(res.Checks) != 3 || res.Checks[2].OK {
		t.Fatalf("pinned exec check with the wrong digest: result %+v, diagnostics %v", res, l)
	}
	if !strings.Contains(res.Checks[2].Message, "refusing to run bin/check.sh: its sha256 is") {
		t.Errorf("message %q does not say the digest did not match", res.Checks[2].Message)
	}
}
