package action_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestApplyHoldsToTheLiveKubernetesVersion applies to the test cluster (which
// runs the Kubernetes kubeplug builds) files and plugins that disagree with it:
// another minor version is an error located at spec.kubernetesVersion, another
// patch a warning, and a plugin whose kubernetesVersion constraint refuses the
// live version an error naming it — before anything is applied.
func TestApplyHoldsToTheLiveKubernetesVersion(t *testing.T) {
	info, err := testcluster.Client(t).Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	live := strings.TrimPrefix(info.GitVersion, "v")
	parts := strings.Split(live, ".")
	if len(parts) != 3 {
		t.Fatalf("test cluster version %q", live)
	}
	otherPatch := parts[0] + "." + parts[1] + ".99"
	otherMinor := parts[0] + ".20.1"
	tests := []struct {
		name, version, constraint string
		wantErr, wantWarn         string
	}{
		{name: "the same version", version: live},
		{name: "another minor", version: otherMinor, wantErr: "cluster.yaml:6:22: spec.kubernetesVersion: the cluster runs Kubernetes " + live + ", but the file says " + otherMinor},
		{name: "another patch", version: otherPatch, wantWarn: "cluster.yaml:6:22: warning: spec.kubernetesVersion: the cluster runs Kubernetes " + live + ", the file says " + otherPatch + ": plugins are checked against " + live},
		{name: "a plugin that refuses the live version", version: otherPatch, constraint: ">" + live, wantErr: "plugin pinned 1.0.0 needs Kubernetes >" + live + ", and the cluster runs " + live},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(name, text string) {
				t.Helper()
				writeTree(t, dir, map[string]string{name: text})
			}
			write("cluster.yaml", `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata:
  name: versions
spec:
  kubernetesVersion: `+tt.version+`
  provider: {local: {}}
  plugins:
    sources: [{dir: ./plugins}]
    enabled: [{name: pinned}]
`)
			kv := ""
			if tt.constraint != "" {
				kv = "  kubernetesVersion: \"" + tt.constraint + "\"\n"
			}
			write("plugins/pinned/plugin.yaml", `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: pinned, version: 1.0.0}
spec:
`+kv+`  contributes:
    kubernetes: {manifests: [cm.yaml]}
`)
			write("plugins/pinned/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: pinned-version-test, namespace: default}\n")
			cfg := &action.Config{NoBuiltin: true, Env: func(string) (string, bool) { return "", false }}
			a := action.NewApply(cfg)
			a.Target.RESTConfig = testcluster.RESTConfig(t)
			a.Timeout = time.Minute
			t.Cleanup(func() {
				u := action.NewUninstall(cfg)
				u.Target.RESTConfig = a.Target.RESTConfig
				_, _ = u.Run(context.WithoutCancel(t.Context()), "pinned")
			})
			_, l := a.Run(t.Context(), load(t, filepath.Join(dir, "cluster.yaml")))
			text := strings.ReplaceAll(l.String(), dir+"/", "")
			if tt.wantErr != "" {
				if !l.HasFatal() || !strings.Contains(text, tt.wantErr) {
					t.Fatalf("diagnostics:\n%s\nwant error %q", text, tt.wantErr)
				}
				if _, err := testcluster.Client(t).CoreV1().ConfigMaps("default").Get(t.Context(), "pinned-version-test", metav1.GetOptions{}); err == nil {
					t.Error("the plugin was applied although its version check failed")
				}
				return
			}
			if l.HasFatal() {
				t.Fatal(text)
			}
			if tt.wantWarn != "" && !strings.Contains(text, tt.wantWarn) {
				t.Errorf("diagnostics:\n%s\nwant warning %q", text, tt.wantWarn)
			}
		})
	}
}
