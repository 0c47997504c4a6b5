package source

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing/fstest"
	"text/template"

	"github.com/Masterminds/semver/v3"
	"github.com/Masterminds/sprig/v3"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// kkpDefinition is the part of a KKP ApplicationDefinition
// (apps.kubermatic.k8c.io/v1) a catalog of them reads.
type kkpDefinition struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Description        string         `json:"description"`
		Method             string         `json:"method"`
		DefaultValues      map[string]any `json:"defaultValues"`
		DefaultValuesBlock string         `json:"defaultValuesBlock"`
		DefaultNamespace   *struct {
			Name string `json:"name"`
		} `json:"defaultNamespace"`
		Versions []kkpVersion `json:"versions"`
	} `json:"spec"`
}

// kkpVersion is one of an ApplicationDefinition's versions.
type kkpVersion struct {
	Version  string `json:"version"`
	Template struct {
		Source struct {
			Helm *struct {
				URL          string `json:"url"`
				ChartName    string `json:"chartName"`
				ChartVersion string `json:"chartVersion"`
			} `json:"helm"`
			Git *struct {
				Remote string `json:"remote"`
			} `json:"git"`
		} `json:"source"`
	} `json:"template"`
}

// KKPApplicationDefinitionKind and KKPAPIGroup identify KKP's
// ApplicationDefinitions.
const (
	KKPApplicationDefinitionKind = "ApplicationDefinition"
	KKPAPIGroup                  = "apps.kubermatic.k8c.io"
)

// maxKKPFile bounds a file of ApplicationDefinitions.
const maxKKPFile = 4 << 20

// IsKKPFile reports whether p names a file of KKP ApplicationDefinitions (a
// YAML file) rather than a package archive.
func IsKKPFile(p string) bool {
	return strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")
}

// kkpFile is a YAML file of KKP ApplicationDefinitions as a source.
type kkpFile struct {
	origin plugin.Origin
	file   string
}

// KKPDefinitions returns the KKP ApplicationDefinitions in file (one or more
// YAML documents) as a source, without converting them first: each version of
// each definition (spec.versions[], its template.source.helm) is a plugin
// version of the definition's name whose package installs that chart by
// reference (helm.url a Helm repository, or an oci:// registry holding
// chartName) as the release NAME in spec.defaultNamespace.name (default NAME),
// with spec.defaultValues (or defaultValuesBlock) as the plugin's defaults and
// the plugin's values as the chart's values. String values holding a KKP
// template ({{ … }}) that reads KKP's data are left out with a warning, so the
// chart's default applies (one reading no data is rendered, as KKP does);
// versions with a git source are left out with a warning.
// An incomplete Helm source, a version that is not semantic, a definition of
// another method, a document that is no ApplicationDefinition: errors naming
// the file, the definition and the field, the rest still listed.
func KKPDefinitions(origin plugin.Origin, file string) Source {
	return &kkpFile{origin: origin, file: file}
}

// String names the source in logs.
func (s *kkpFile) String() string { return s.origin.Name + " kkp " + s.file }

// kkpRef is a listed version's package, made when listed.
type kkpRef struct{ fsys fs.FS }

// List implements [Source].
func (s *kkpFile) List(ctx context.Context) ([]*Version, diag.List) {
	var l diag.List
	if err := ctx.Err(); err != nil {
		l.Errorf(s.file, 0, 0, "", "cannot list: %v", err)
		return nil, l
	}
	data, err := bounded.ReadFileAs("KKP ApplicationDefinitions file", s.file, maxKKPFile)
	if err != nil {
		l.Errorf(s.file, 0, 0, "", "%v", err)
		return nil, l
	}
	var out []*Version
	dec := yamlDocuments(data)
	for i := 0; ; i++ {
		doc, err := dec()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			l.Errorf(s.file, 0, 0, fmt.Sprintf("document %d", i+1), "%v", err)
			break
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		out = append(out, s.definition(doc, i+1, &l)...)
	}
	return out, l
}

// yamlDocuments reads a YAML stream document by document.
func yamlDocuments(data []byte) func() ([]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	return r.Read
}

// definition lists the versions of the ApplicationDefinition doc (the n-th
// document of the file): read and checked (read), its defaults (defaults),
// then each version a plugin version (version).
func (s *kkpFile) definition(doc []byte, n int, l *diag.List) []*Version {
	d, where, ok := s.read(doc, n, l)
	if !ok {
		return nil
	}
	defaults, ok := s.defaults(d, where, l)
	if !ok {
		return nil
	}
	k := kkpApp{name: d.Metadata.Name, namespace: d.Metadata.Name, description: d.Spec.Description, defaults: defaults, where: where}
	if d.Spec.DefaultNamespace != nil && d.Spec.DefaultNamespace.Name != "" {
		k.namespace = d.Spec.DefaultNamespace.Name
	}
	var out []*Version
	seen := map[string]bool{}
	for i, v := range d.Spec.Versions {
		if pv := s.version(k, i, v, seen, l); pv != nil {
			out = append(out, pv)
		}
	}
	return out
}

// kkpApp is what every version of one ApplicationDefinition shares.
type kkpApp struct {
	name, namespace, description string
	defaults                     map[string]any
	// where names the definition in messages.
	where string
}

// read decodes doc and checks it is an ApplicationDefinition kubeplug installs:
// its kind, a plugin name, the helm method.
func (s *kkpFile) read(doc []byte, n int, l *diag.List) (d kkpDefinition, where string, ok bool) {
	if err := yaml.Unmarshal(doc, &d); err != nil {
		l.Errorf(s.file, 0, 0, fmt.Sprintf("document %d", n), "not a KKP ApplicationDefinition: %v", err)
		return d, "", false
	}
	where = fmt.Sprintf("ApplicationDefinition %s (document %d)", d.Metadata.Name, n)
	group, _, _ := strings.Cut(d.APIVersion, "/")
	if group != KKPAPIGroup || d.Kind != KKPApplicationDefinitionKind {
		l.Errorf(s.file, 0, 0, fmt.Sprintf("document %d", n), "expected a KKP ApplicationDefinition (apiVersion %s/v1, kind %s), found apiVersion %q and kind %q", KKPAPIGroup, KKPApplicationDefinitionKind, d.APIVersion, d.Kind)
		return d, where, false
	}
	name := d.Metadata.Name
	if !plugin.NameRE.MatchString(name) || len(name) > 53 {
		l.Errorf(s.file, 0, 0, "metadata.name", "%s: name %q is not a plugin name (a DNS label of at most 53 characters, as a Helm release's)", where, name)
		return d, where, false
	}
	if d.Spec.Method != "" && d.Spec.Method != "helm" {
		l.Errorf(s.file, 0, 0, "spec.method", "%s: method %q is not one kubeplug installs (helm)", where, d.Spec.Method)
		return d, where, false
	}
	return d, where, true
}

// defaults are the definition's default values (defaultValues, or the YAML of
// defaultValuesBlock), with the templates that read KKP's data left out.
func (s *kkpFile) defaults(d kkpDefinition, where string, l *diag.List) (map[string]any, bool) {
	defaults, field := d.Spec.DefaultValues, "spec.defaultValues"
	if d.Spec.DefaultValuesBlock != "" {
		field = "spec.defaultValuesBlock"
		if len(defaults) > 0 {
			l.Errorf(s.file, 0, 0, "spec.defaultValuesBlock", "%s: spec.defaultValues and spec.defaultValuesBlock are both set; KKP refuses that too", where)
			return nil, false
		}
		if err := yaml.Unmarshal([]byte(d.Spec.DefaultValuesBlock), &defaults); err != nil {
			l.Errorf(s.file, 0, 0, "spec.defaultValuesBlock", "%s: %v", where, err)
			return nil, false
		}
	}
	if len(defaults) > 0 {
		defaults, _ = untemplated(defaults, field, func(path, v string) {
			l.Warnf(s.file, 0, 0, path, "%s: %q is a KKP template, rendered with data kubeplug does not have; left out, so the chart's default applies", where, v)
		}).(map[string]any)
	}
	return defaults, true
}

// version is the plugin version of the i-th version of an ApplicationDefinition:
// a plugin that installs its Helm chart by reference; nil, reported, for a
// version kubeplug does not install (a git source) or cannot read.
func (s *kkpFile) version(k kkpApp, i int, v kkpVersion, seen map[string]bool, l *diag.List) *Version {
	field := fmt.Sprintf("spec.versions[%d]", i)
	where, name := k.where, k.name
	ver, err := semver.NewVersion(v.Version)
	if err != nil {
		l.Errorf(s.file, 0, 0, field+".version", "%s: version %q is not a semantic version", where, v.Version)
		return nil
	}
	if seen[ver.String()] {
		l.Errorf(s.file, 0, 0, field+".version", "%s: version %s is listed twice", where, ver)
		return nil
	}
	seen[ver.String()] = true
	h := v.Template.Source.Helm
	if v.Template.Source.Git != nil && h == nil {
		// A catalog may well hold applications kubeplug cannot install: say
		// so, and list the others.
		l.Warnf(s.file, 0, 0, field+".template.source", "%s %s: a git source (%s), which kubeplug does not install; left out", where, ver, v.Template.Source.Git.Remote)
		return nil
	}
	if h == nil || h.URL == "" || h.ChartName == "" || h.ChartVersion == "" {
		l.Errorf(s.file, 0, 0, field+".template.source.helm", "%s %s: expected a Helm source with url, chartName and chartVersion", where, ver)
		return nil
	}
	rel := map[string]any{"name": name, "namespace": k.namespace, "version": h.ChartVersion, "values": map[string]any{"fromValue": ""}}
	if strings.HasPrefix(h.URL, oci.Scheme) {
		rel["chart"] = strings.TrimSuffix(h.URL, "/") + "/" + h.ChartName
	} else {
		rel["repo"], rel["chart"] = h.URL, h.ChartName
	}
	desc := k.description
	if desc == "" {
		desc = fmt.Sprintf("%s %s (Helm chart %s %s from %s)", name, ver, h.ChartName, h.ChartVersion, h.URL)
	}
	spec := map[string]any{"contributes": map[string]any{"kubernetes": map[string]any{"helmReleases": []any{rel}}}}
	if len(k.defaults) > 0 {
		spec["values"] = map[string]any{"defaults": k.defaults}
	}
	manifest := map[string]any{
		"apiVersion": "kubeplug.dev/v1alpha1", "kind": "Plugin",
		"metadata": map[string]any{"name": name, "version": ver.String(), "description": firstLine(desc)},
		"spec":     spec,
	}
	j, err := json.Marshal(manifest)
	var y []byte
	if err == nil {
		y, err = yaml.JSONToYAML(j)
	}
	if err != nil {
		l.Errorf(s.file, 0, 0, field, "%s %s: %v", where, ver, err)
		return nil
	}
	fsys := fstest.MapFS{plugin.ManifestFile: {Data: y, Mode: 0o644}}
	loc := s.file + "#" + name + "@" + ver.String()
	m, ml := plugin.ReadManifest(fsys, loc)
	if m == nil || ml.HasFatal() {
		*l = append(*l, ml...)
		return nil
	}
	pv := versionOf(m.Plugin, s.origin, loc)
	pv.Ref = kkpRef{fsys: fsys}
	return pv
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// untemplated returns v with the string leaves that hold a template ("{{")
// rendered, as KKP renders them, when they read no data (KKP's
// {{ `{{ .Release.Namespace }}` }} hands the chart's tpl a template of its
// own), and left out, reported by path, when they do: kubeplug has no KKP data.
func untemplated(v any, path string, report func(path, v string)) any {
	switch t := v.(type) {
	case string:
		if strings.Contains(t, "{{") {
			out, ok := renderDataFree(t)
			if !ok {
				report(path, t)
				return nil
			}
			return out
		}
	case map[string]any:
		out := map[string]any{}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if e := untemplated(t[k], path+"."+k, report); e != nil || t[k] == nil {
				out[k] = e
			}
		}
		return out
	case []any:
		out := make([]any, 0, len(t))
		for i, e := range t {
			if e2 := untemplated(e, fmt.Sprintf("%s[%d]", path, i), report); e2 != nil || e == nil {
				out = append(out, e2)
			}
		}
		return out
	}
	return v
}

// renderDataFree renders a template that reads no data (with Sprig's
// functions, as KKP has them); false when it reads some or does not render.
func renderDataFree(s string) (string, bool) {
	t, err := template.New("").Funcs(sprig.TxtFuncMap()).Option("missingkey=error").Parse(s)
	if err != nil {
		return "", false
	}
	var b strings.Builder
	if err := t.Execute(&b, nil); err != nil || strings.Contains(b.String(), "<no value>") {
		return "", false
	}
	return b.String(), true
}

// Fetch implements [Source].
func (s *kkpFile) Fetch(ctx context.Context, v *Version) (*plugin.Package, diag.List) {
	ref, ok := v.Ref.(kkpRef)
	if !ok {
		var l diag.List
		l.Errorf(v.Location, 0, 0, "", "plugin %s was not listed by %s", v.ID(), s.file)
		return nil, l
	}
	return plugin.Load(ref.fsys, s.origin, v.Location)
}
