package action

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// Run creates DIR/NAME with a commented plugin.yaml that shows each layer a
// plugin adds to — a node file, a systemd unit, a Node label and a hook on the
// workers' machines, a manifest and a Helm release (a chart inside the package)
// in the cluster, validate checks — a values schema, and returns the package's
// path. It refuses to touch an existing path.
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
		p := filepath.Join(tmp, filepath.FromSlash(strings.ReplaceAll(file, "[[.Name]]", name)))
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
# See it with:     kubeplug plugin show [[.Name]] --plugin-dir [[.Name]]
# Try it with:     kubeplug plugin test [[.Name]] --cluster   (a throwaway local cluster)
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
    # The machines of the worker pools (drop roles for every machine; pools:
    # [NAME] for some pools). On the local provider each node's machine is a
    # directory, $KUBEPLUG_ROOT; on real machines it is /.
    nodes:
      - roles: [worker]
        # A file; its content is a Go template over .Values.
        files:
          - path: /etc/[[.Name]]/[[.Name]].conf
            mode: "0644"
            content: "message={{ .Values.message }}\n"
        # A systemd unit, enabled at boot.
        systemdUnits:
          - name: [[.Name]].service
            enable: true
            content: |
              [Unit]
              Description=[[.Name]] (a kubeplug plugin)

              [Service]
              Type=oneshot
              ExecStart=/bin/cat /etc/[[.Name]]/[[.Name]].conf

              [Install]
              WantedBy=multi-user.target
        # A label (and taints, if you need them) on the machine's Node.
        kubelet:
          labels: {example.com/[[.Name]]: enabled}
        # A hook the node agent runs once the machine joined (beforeNodeup runs
        # before it joins; afterDeploy once the cluster's plugins are deployed).
        hooks:
          - name: record
            at: afterNodeup
            run:
              command:
                - /bin/sh
                - -c
                - mkdir -p "$KUBEPLUG_ROOT/var/lib/[[.Name]]" && cp "$KUBEPLUG_ROOT/etc/[[.Name]]/[[.Name]].conf" "$KUBEPLUG_ROOT/var/lib/[[.Name]]/joined"
            timeout: 30s
    kubernetes:
      # Files or directories of YAML manifests; they are Go templates over .Values.
      manifests: [manifests/]
      # A Helm chart inside the package, installed as a real Helm release
      # (helm list shows it); string values are Go templates over .Values.
      helmReleases:
        - name: [[.Name]]-chart
          namespace: default
          chart: charts/[[.Name]]
          values:
            message: "{{ .Values.message }}"
    # Other layers a plugin can add to:
    # controlPlane: {apiServer: {flags: {audit-log-maxage: "7"}}}
  # Checks that prove the plugin works once deployed.
  validate:
    - name: configmap-present
      wait: {apiVersion: v1, kind: ConfigMap, namespace: default, name: [[.Name]]}
    - name: chart-installed
      expression:
        apiVersion: v1
        kind: ConfigMap
        namespace: default
        name: [[.Name]]-chart
        expression: object.data.message != ""
        timeout: 1m
`,
	"values.schema.json": `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "[[.Name]] values",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "message": {"type": "string", "minLength": 1, "description": "Text stored in the ConfigMaps and the node file"},
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
	"charts/[[.Name]]/Chart.yaml": `apiVersion: v2
name: [[.Name]]
description: The Helm chart of the kubeplug plugin [[.Name]]
type: application
version: 0.1.0
`,
	"charts/[[.Name]]/values.yaml": `# Set by the plugin's helmReleases values.
message: ""
`,
	"charts/[[.Name]]/templates/configmap.yaml": `# A Helm template: rendered by Helm, with the release's values.
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
  labels:
    app.kubernetes.io/managed-by: {{ .Release.Service }}
data:
  message: {{ .Values.message | quote }}
`,
}
