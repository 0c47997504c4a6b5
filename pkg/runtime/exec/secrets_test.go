package exec_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/runtime"
	"github.com/kubeplug/kubeplug/pkg/source"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// writePackage writes files (path -> content) as a package directory and loads it.
func writePackage(t *testing.T, files map[string]string) *plugin.Package {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o755))
	}
	p, l := plugin.Load(os.DirFS(dir), plugin.OriginUser, dir)
	if l.HasFatal() {
		t.Fatal(l)
	}
	return p
}

// TestSecretsOnlyToTheirOwner runs an exec plugin that records everything it can
// see — its request, its environment, its working directory and the files in it —
// and echoes its request to stderr, next to a declarative plugin whose sensitive
// value also lands in the model. Nothing the exec plugin sees, and nothing kubeplug
// logs or reports of its output, holds the other plugin's value in any form; its
// own sensitive value reaches it in its values, and is masked in the logs too.
func TestSecretsOnlyToTheirOwner(t *testing.T) {
	const (
		theirs = "hunter2-vault-password"
		mine   = "sh-own-token-123"
	)
	vault := writePackage(t, map[string]string{"plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: vault, version: 1.0.0}
spec:
  values:
    defaults: {password: ""}
    sensitive: [/password]
  contributes:
    nodes:
      - roles: [worker]
        files:
          - {path: /etc/vault/password, mode: "0600", content: "{{ .Values.password }}"}
`})
	src := `#!/bin/sh
req=$(cat)
{ echo "$req"; env; pwd; ls -la; find . -type f -exec cat {} + ; } >>"$DUMP" 2>&1
echo "request: $req" >&2
if [ "$KUBEPLUG_STAGE" = validate ]; then echo "giving up with $req"; exit 1; fi
exit 3
`
	sum := sha256.Sum256([]byte(src))
	sh := writePackage(t, map[string]string{
		"plugin.yaml": fmt.Sprintf(`apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: sh, version: 1.0.0}
spec:
  requires: [{name: vault}]
  values:
    defaults: {token: ""}
    sensitive: [/token]
  runtime: {type: exec, command: [bin/plugin], sha256: %s}
`, hex.EncodeToString(sum[:])),
		"bin/plugin": src,
	})
	idx, l := source.NewIndex([]*plugin.Package{vault, sh})
	if l.HasFatal() {
		t.Fatal(l)
	}
	cl, l := config.Parse("cluster.yaml", []byte(`apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: c}
spec:
  kubernetesVersion: 1.36.3
  nodePools: [{name: workers, count: 1, labels: {copied: `+theirs+`}}]
  plugins:
    enabled:
      - {name: vault, values: {password: `+theirs+`}}
      - {name: sh, values: {token: `+mine+`}}
`))
	if l.HasFatal() {
		t.Fatal(l)
	}
	dump := filepath.Join(t.TempDir(), "dump")
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	rs := runtime.NewResolver(runtime.Options{Logger: log, Env: []string{"DUMP=" + dump}})
	defer func() { _ = rs.Close() }()
	e := engine.New(engine.Options{Logger: log, Runtimes: rs})
	plan, l := e.Plan(t.Context(), cl, idx)
	if plan == nil {
		t.Fatal(l)
	}
	_, l = e.Run(t.Context(), plan, stage.Validate)
	if !l.HasFatal() {
		t.Fatalf("the plugin's validate failure is not reported:\n%s", l)
	}
	seen, err := os.ReadFile(dump)
	must(t, err)
	for _, tc := range []struct {
		what, text, secret string
	}{
		{"what the plugin saw", string(seen), theirs},
		{"the log", logs.String(), theirs},
		{"the log", logs.String(), mine},
		{"the diagnostics", l.String(), theirs},
		{"the diagnostics", l.String(), mine},
	} {
		for _, form := range []string{tc.secret, base64.StdEncoding.EncodeToString([]byte(tc.secret)), base64.RawURLEncoding.EncodeToString([]byte(tc.secret))} {
			if strings.Contains(tc.text, form) {
				t.Errorf("%s holds the sensitive value %q as %q", tc.what, tc.secret, form)
			}
		}
	}
	if !strings.Contains(string(seen), `"values":{"token":"`+mine+`"}`) {
		t.Errorf("the plugin did not get its own sensitive value in its values:\n%.2000s", seen)
	}
	if !strings.Contains(logs.String(), "request: ") || !strings.Contains(l.String(), "***") {
		t.Errorf("the plugin's output is not logged and reported, masked:\nlog %.500s\ndiagnostics %.500s", logs.String(), l.String())
	}
}
