package action

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"text/template"

	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// New scaffolds a plugin package that lints clean.
type New struct {
	// Dir is where the package directory is created; the working directory when empty.
	Dir string
}

// NewNew returns a New action.
func NewNew() *New { return &New{} }

// Run creates DIR/NAME with a commented plugin.yaml, a values schema and a manifest,
// and returns the package's path. It refuses to touch an existing path.
func (a *New) Run(ctx context.Context, name string) (string, error) {
	if !plugin.NameRE.MatchString(name) || len(name) > 63 {
		return "", fmt.Errorf("invalid plugin name %q: expected a DNS label (lower-case letters, digits and '-', at most 63 characters)", name)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	dir := filepath.Join(a.Dir, name)
	if _, err := os.Lstat(dir); err == nil {
		return "", fmt.Errorf("%s already exists; choose another name or remove it", dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("check %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+name+"-new-")
	if err != nil {
		return "", fmt.Errorf("create plugin directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	for file, text := range scaffold {
		var buf bytes.Buffer
		if err := template.Must(template.New(file).Delims("[[", "]]").Parse(text)).Execute(&buf, map[string]string{"Name": name}); err != nil {
			return "", fmt.Errorf("render %s: %w", file, err)
		}
		p := filepath.Join(tmp, filepath.FromSlash(file))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", fmt.Errorf("create %s: %w", file, err)
		}
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			return "", fmt.Errorf("write %s: %w", file, err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	return dir, nil
}

var scaffold = map[string]string{
	"plugin.yaml": `# [[.Name]]: a kubeplug plugin.
#
# Check it with:   kubeplug plugin lint [[.Name]]
# Try it with:     kubeplug plugin show [[.Name]] --plugin-dir .
# Enable it in cluster.yaml under spec.plugins.enabled, with spec.plugins.sources
# pointing at the directory that holds this one.
apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata:
  name: [[.Name]]
  # A semantic version; bump it on every change you ship.
  version: 0.1.0
  description: What [[.Name]] adds to a cluster, in one line
spec:
  # Kubernetes versions this plugin supports (a semver constraint).
  kubernetesVersion: ">=1.30.0-0"
  # Plugins that must be installed first:
  # requires:
  #   - {name: cert-manager, version: ">=1.14"}
  values:
    # Values are checked against this JSON Schema (draft 2020-12).
    schema: values.schema.json
    defaults:
      message: hello from [[.Name]]
      replicas: 1
    # JSON pointers of values never printed, logged or written in clear:
    # sensitive: [/apiKey]
  contributes:
    kubernetes:
      # Files or directories of YAML manifests; they are Go templates over .Values.
      manifests: [manifests/]
    # Other layers a plugin can add to:
    # controlPlane: {apiServer: {flags: {audit-log-maxage: "7"}}}
    # nodes: [{pools: [workers], files: [{path: /etc/[[.Name]].conf, content: "..."}]}]
  # Checks that prove the plugin works once deployed.
  validate:
    - name: configmap-present
      wait: {apiVersion: v1, kind: ConfigMap, namespace: default, name: [[.Name]]}
`,
	"values.schema.json": `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "[[.Name]] values",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "message": {"type": "string", "minLength": 1, "description": "Text stored in the ConfigMap"},
    "replicas": {"type": "integer", "minimum": 0, "description": "An example number"}
  },
  "required": ["message"]
}
`,
	"manifests/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: [[.Name]]
  namespace: default
  labels:
    app.kubernetes.io/name: [[.Name]]
data:
  message: {{ .Values.message | quote }}
  replicas: "{{ .Values.replicas }}"
`,
}
