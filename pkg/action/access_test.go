package action_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/sdk/sdktest"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// codePlugin writes a cluster file enabling "coder", an exec plugin in sh whose
// code, with the kubeconfig its request carries (as $KUBECONFIG), creates a
// ConfigMap in ns at deploy and at validate reads it back, says who it is and
// finds it may not read Secrets.
func codePlugin(t *testing.T, ns string) string {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
req=$(cat)
ok='{"protocolVersion":"kubeplug.dev/exec/v1"}'
fail() { printf '{"protocolVersion":"kubeplug.dev/exec/v1","diagnostics":[{"severity":"fatal","message":"%s"}]}\n' "$1"; exit 0; }
case "$KUBEPLUG_STAGE" in
deploy|validate)
  case "$req" in *'"kubeconfig":'*) ;; *) fail "no kubeconfig in the request" ;; esac
  [ -f "$KUBECONFIG" ] || fail "no KUBECONFIG file" ;;
*) exit 3 ;;
esac
who=$(kubectl auth whoami -o jsonpath='{.status.userInfo.username}') || fail "whoami failed"
[ "$who" = system:serviceaccount:kubeplug-system:kubeplug-plugin-coder ] || fail "runs as $who"
if [ "$KUBEPLUG_STAGE" = deploy ]; then
  kubectl create configmap made-by-code -n ` + ns + ` --from-literal=stage=deploy >&2 || fail "create failed"
else
  [ "$(kubectl get configmap made-by-code -n ` + ns + ` -o jsonpath='{.data.stage}')" = deploy ] || fail "no ConfigMap from deploy"
  kubectl get secrets -n ` + ns + ` >/dev/null 2>&1 && fail "may read Secrets"
fi
echo "$ok"
`
	sum := sha256.Sum256([]byte(script))
	files := map[string]string{
		"cluster.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: code}
spec:
  kubernetesVersion: 1.37.1
  plugins:
    sources: [{dir: ./plugins}]
    enabled: [{name: coder}]
`,
		"plugins/coder/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: coder, version: 1.0.0}
spec:
  runtime:
    type: exec
    command: [bin/plugin.sh]
    sha256: ` + hex.EncodeToString(sum[:]) + `
    rbac:
      - {resources: [configmaps], verbs: [get, create]}
`,
		"plugins/coder/bin/plugin.sh": script,
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

// TestPluginCodeCredentials: exec plugin code at the deploy and validate stages
// gets a kubeconfig for the cluster as its own ServiceAccount, with the rules
// of its spec.runtime.rbac and no more: it creates an object through the API at
// deploy, reads it at validate, and may not read Secrets.
func TestPluginCodeCredentials(t *testing.T) {
	ns := testcluster.Namespace(t)
	bin := os.Getenv("KUBEPLUG_LOCALCLUSTER_BIN")
	if bin == "" {
		t.Skip("KUBEPLUG_LOCALCLUSTER_BIN is not set: kubectl for the plugin's script")
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	apply := action.NewApply(&action.Config{NoBuiltin: true, Env: func(string) (string, bool) { return "", false }})
	apply.Target.RESTConfig = testcluster.RESTConfig(t)
	apply.Timeout = time.Minute
	res, l := apply.Run(t.Context(), load(t, codePlugin(t, ns)))
	if l.HasFatal() {
		t.Fatal(l)
	}
	if !res.Validated {
		t.Fatalf("not validated: %+v", res)
	}
	if strings.Contains(l.String(), "fatal") {
		t.Errorf("diagnostics: %s", l)
	}
}

// TestPluginCodeCredentialsGRPC: the same for a gRPC plugin written with the
// Go SDK and client-go (testdata/grpccoder), which reads the kubeconfig from
// its request.
func TestPluginCodeCredentialsGRPC(t *testing.T) {
	ns := testcluster.Namespace(t)
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "plugins", "grpccoder"), os.DirFS(sdktest.Package(t, "testdata/grpccoder"))); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: code}
spec:
  kubernetesVersion: 1.37.1
  plugins:
    sources: [{dir: ./plugins}]
    enabled: [{name: grpccoder, values: {namespace: `+ns+`}}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	apply := action.NewApply(&action.Config{NoBuiltin: true, Env: func(string) (string, bool) { return "", false }})
	apply.Target.RESTConfig = testcluster.RESTConfig(t)
	apply.Timeout = time.Minute
	res, l := apply.Run(t.Context(), load(t, file))
	if l.HasFatal() {
		t.Fatal(l)
	}
	if !res.Validated {
		t.Fatalf("not validated: %+v", res)
	}
}
