package faults

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The fixture is a cluster of four plugins in two waves: base (a Namespace, a CRD
// and a ConfigMap) in wave 0; app (ConfigMaps, a Deployment, a custom resource)
// and web (Helm charts) requiring it, and legacy (a ConfigMap and a Helm chart)
// in wave 1. Version 2 changes values and content everywhere, adds objects and a
// Helm release, removes an object, and drops legacy from both the cluster file
// and the plugin source (a plugin gone from its catalog while installed).
//
// @P@ is replaced by a suffix unique to each case, so that one case's namespace
// and CRD never collide with the previous case's being deleted.

const clusterYAML = `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: faults}
spec:
  kubernetesVersion: 1.37.1
  provider: {local: {}}
  nodePools:
    - {name: workers, role: worker, count: 1}
  plugins:
    sources: [{dir: ./plugins}]
    enabled:
      - {name: base-@P@, values: {release: "@V@"}}
      - {name: app-@P@, values: {release: "@V@", image: "registry.example/app:@V@"}}
      - {name: web-@P@, values: {greeting: "hello @V@"}}
@LEGACY@`

const legacyEnabled = `      - {name: legacy-@P@}
`

// appConfigMaps is how many numbered ConfigMaps app has: enough that a kill in
// the middle of the wave finds some applied and some not.
const appConfigMaps = 12

var pluginsV1 = map[string]string{
	"base-@P@/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: base-@P@, version: 1.0.0}
spec:
  values: {defaults: {release: "0"}}
  contributes:
    kubernetes: {manifests: [manifests/]}
`,
	"base-@P@/manifests/base.yaml": `apiVersion: v1
kind: Namespace
metadata: {name: faults-@P@}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.@P@.faults.kubeplug.dev}
spec:
  group: @P@.faults.kubeplug.dev
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: string}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: base-config, namespace: faults-@P@}
data: {release: "{{ .Values.release }}"}
`,
	"app-@P@/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: app-@P@, version: 1.0.0}
spec:
  requires: [{name: base-@P@}]
  values: {defaults: {release: "0", image: "registry.example/app:0"}}
  contributes:
    kubernetes: {manifests: [manifests/]}
`,
	"app-@P@/manifests/app.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: faults-@P@}
spec:
  replicas: 1
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      containers: [{name: app, image: "{{ .Values.image }}"}]
---
apiVersion: @P@.faults.kubeplug.dev/v1
kind: Widget
metadata: {name: widget, namespace: faults-@P@}
spec: {size: "{{ .Values.release }}"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app-a, namespace: faults-@P@}
data: {release: "{{ .Values.release }}"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app-b, namespace: faults-@P@}
data: {release: "{{ .Values.release }}"}
{{- range $i := until ` + strconv.Itoa(appConfigMaps) + ` }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app-cm-{{ $i }}, namespace: faults-@P@}
data: {release: "{{ $.Values.release }}"}
{{- end }}
`,
	"web-@P@/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: web-@P@, version: 1.0.0}
spec:
  requires: [{name: base-@P@}]
  values: {defaults: {greeting: hi}}
  contributes:
    kubernetes:
      helmReleases:
        - {name: web, namespace: faults-@P@, chart: charts/web, values: {greeting: "{{ .Values.greeting }}"}}
`,
	"web-@P@/charts/web/Chart.yaml":               "apiVersion: v2\nname: web\nversion: 0.1.0\n",
	"web-@P@/charts/web/templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-greeting}\ndata: {greeting: {{ .Values.greeting | quote }}}\n",
	"web-@P@/charts/web/templates/service.yaml":   "apiVersion: v1\nkind: Service\nmetadata: {name: {{ .Release.Name }}}\nspec:\n  selector: {app: {{ .Release.Name }}}\n  ports: [{port: 80}]\n",
	"legacy-@P@/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: legacy-@P@, version: 1.0.0}
spec:
  requires: [{name: base-@P@}]
  contributes:
    kubernetes:
      manifests: [manifests/]
      helmReleases:
        - {name: old, namespace: faults-@P@, chart: charts/old}
`,
	"legacy-@P@/manifests/legacy.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: legacy-a, namespace: faults-@P@}
data: {x: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: legacy-b, namespace: faults-@P@}
data: {x: "1"}
`,
	"legacy-@P@/charts/old/Chart.yaml":               "apiVersion: v2\nname: old\nversion: 0.1.0\n",
	"legacy-@P@/charts/old/templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-data}\ndata: {x: \"1\"}\n",
}

// pluginsV2 is version 2: every plugin 2.0.0; app drops app-b and adds app-c;
// web adds a second Helm release, extra; legacy is gone.
func pluginsV2() map[string]string {
	out := map[string]string{}
	for p, c := range pluginsV1 {
		if strings.HasPrefix(p, "legacy-") {
			continue
		}
		out[p] = strings.Replace(c, "version: 1.0.0", "version: 2.0.0", 1)
	}
	out["app-@P@/manifests/app.yaml"] = strings.Replace(out["app-@P@/manifests/app.yaml"], "metadata: {name: app-b,", "metadata: {name: app-c,", 1)
	out["web-@P@/plugin.yaml"] = strings.Replace(out["web-@P@/plugin.yaml"], `        - {name: web,`, `        - {name: extra, namespace: faults-@P@, chart: charts/web, values: {greeting: extra}}
        - {name: web,`, 1)
	return out
}

// writeFixture writes version v (1 or 2) of the fixture for case p under dir and
// returns the cluster file's path.
func writeFixture(t *testing.T, dir, p string, v int) string {
	t.Helper()
	files, legacy := pluginsV1, legacyEnabled
	if v == 2 {
		files, legacy = pluginsV2(), ""
	}
	ver := "1"
	if v == 2 {
		ver = "2"
	}
	if err := os.RemoveAll(filepath.Join(dir, "plugins")); err != nil {
		t.Fatal(err)
	}
	all := map[string]string{"cluster.yaml": strings.ReplaceAll(strings.Replace(clusterYAML, "@LEGACY@", legacy, 1), "@V@", ver)}
	for path, c := range files {
		all[filepath.Join("plugins", path)] = c
	}
	for path, c := range all {
		path = filepath.Join(dir, strings.ReplaceAll(path, "@P@", p))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(c, "@P@", p)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "cluster.yaml")
}
