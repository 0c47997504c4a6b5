package importer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

// KKP's ApplicationDefinition, the part the importer reads. Fields the importer
// does not name are found in the document itself and reported as unmapped.
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
			Name        string            `json:"name"`
			Create      *bool             `json:"create"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"defaultNamespace"`
		Versions []struct {
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
		} `json:"versions"`
	} `json:"spec"`
}

// kkpGroup is the API group of KKP's application resources.
const kkpGroup = "apps.kubermatic.k8c.io/"

// FromKKP imports a KKP ApplicationDefinition as a versioned catalog: one plugin
// version per version of the definition, each installing that version's Helm
// chart with the definition's default values, packaged into archives listed by
// one index.yaml. KKP's definitions name their charts by repository and version;
// the charts themselves come from o.Charts, a directory holding them as
// `helm pull` writes them (NAME-VERSION.tgz) or unpacked (NAME-VERSION/ or NAME/).
//
// Branches: a translation that follows docs/import.md's mapping table for this
// format row by row: one guarded step per source field, each refusing or listing
// what kubeplug cannot carry with its own message, so the code and the table can
// be read side by side.
func FromKKP(input string, o Options) (*Result, error) {
	data, err := readFile(input)
	if err != nil {
		return nil, err
	}
	raw, err := decodeMap(input, data)
	if err != nil {
		return nil, err
	}
	var d kkpDefinition
	if err := decodeLoose(input, data, &d); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(d.APIVersion, kkpGroup) || d.Kind != "ApplicationDefinition" {
		return nil, fmt.Errorf("%s: %w: expected a KKP ApplicationDefinition (apiVersion %sv1, kind ApplicationDefinition), found apiVersion %q and kind %q", input, ErrFormat, kkpGroup, d.APIVersion, d.Kind)
	}
	if len(d.Spec.Versions) == 0 {
		return nil, fmt.Errorf("%s: spec.versions: the definition has no version to import", input)
	}
	if d.Spec.Method != "" && d.Spec.Method != "helm" {
		return nil, fmt.Errorf("%s: spec.method: %q is not a method kubeplug imports (helm)", input, d.Spec.Method)
	}
	var cat Report
	cat.Source = fmt.Sprintf("the KKP ApplicationDefinition `%s`", base(input))
	name, err := Name(&cat, "metadata.name", d.Metadata.Name, 53)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", input, err)
	}
	original := "original/" + base(input)
	cat.Original = []string{fmt.Sprintf("`%s`: the ApplicationDefinition (also in every archive)", original)}
	values, err := kkpValues(&cat, input, d.Spec.DefaultValues, d.Spec.DefaultValuesBlock)
	if err != nil {
		return nil, err
	}
	ns := o.Namespace
	if ns == "" && d.Spec.DefaultNamespace != nil && d.Spec.DefaultNamespace.Name != "" {
		ns = d.Spec.DefaultNamespace.Name
	}
	if ns == "" {
		ns = name
	}
	var nsManifest []byte
	if dn := d.Spec.DefaultNamespace; dn != nil {
		cat.Map("spec.defaultNamespace.name", fmt.Sprintf("the Helm release's namespace `%s`", ns))
		if len(dn.Labels) > 0 || len(dn.Annotations) > 0 {
			nsManifest, err = yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns, "labels": dn.Labels, "annotations": dn.Annotations}})
			if err != nil {
				return nil, fmt.Errorf("%s: spec.defaultNamespace: %w", input, err)
			}
			cat.Map("spec.defaultNamespace.labels, .annotations", "`manifests/namespace.yaml`")
		}
		if dn.Create != nil && !*dn.Create {
			cat.Unmap("spec.defaultNamespace.create", "false: kubeplug's Helm releases create their namespace when it is missing")
		}
	}
	cat.Map("metadata.name", "`metadata.name` of every version, the Helm release's name")
	if d.Spec.Description != "" {
		cat.Map("spec.description", "`metadata.description` of every version (its first line)")
	}
	res := &Result{Catalog: name, Report: &cat}
	seen := map[string]string{}
	for i, v := range d.Spec.Versions {
		field := fmt.Sprintf("spec.versions[%d]", i)
		var r Report
		r.Source = cat.Source + ", " + field
		version, err := Version(&r, field+".version", v.Version)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", input, err)
		}
		if prev, dup := seen[version]; dup {
			return nil, fmt.Errorf("%s: %s.version: %q is version %s again, as %s", input, field, v.Version, version, prev)
		}
		seen[version] = field
		h := v.Template.Source.Helm
		if h == nil {
			what := "no source"
			if v.Template.Source.Git != nil {
				what = "a git source (" + v.Template.Source.Git.Remote + ")"
			}
			return nil, fmt.Errorf("%s: %s.template.source: %s; kubeplug imports Helm sources (helm.chartName, chartVersion, url)", input, field, what)
		}
		chart, from, err := findChart(o.Charts, h.ChartName, h.ChartVersion, h.URL)
		if err != nil {
			return nil, fmt.Errorf("%s: %s.template.source.helm: %w", input, field, err)
		}
		m, _, err := readChart(from+"/Chart.yaml", chart)
		if err != nil {
			return nil, err
		}
		if m.Name != h.ChartName || m.Version != h.ChartVersion {
			return nil, fmt.Errorf("%s: %s.template.source.helm: %s holds chart %s %s, not %s %s", input, field, from, m.Name, m.Version, h.ChartName, h.ChartVersion)
		}
		p := newPackage(name+"-"+version, name, version, d.Spec.Description)
		if p.Manifest.Metadata.Description == "" {
			p.Manifest.Metadata.Description = fmt.Sprintf("%s %s (Helm chart %s %s)", d.Metadata.Name, v.Version, h.ChartName, h.ChartVersion)
		}
		chartDir := "charts/" + h.ChartName
		for f, data := range chart {
			p.Files[chartDir+"/"+f] = data
		}
		p.Files[original] = data
		p.Manifest.Spec.KubernetesVersion = strings.TrimSpace(m.KubeVersion)
		p.kubernetes().HelmReleases = []v1alpha1.HelmRelease{{Name: name, Chart: chartDir, Namespace: ns, Values: values}}
		if nsManifest != nil {
			p.Files["manifests/namespace.yaml"] = nsManifest
			p.kubernetes().Manifests = []string{"manifests/"}
		}
		r.Original = []string{fmt.Sprintf("`%s`: the ApplicationDefinition", original), fmt.Sprintf("`%s/`: chart %s %s from %s, copied whole", chartDir, h.ChartName, h.ChartVersion, from)}
		r.Map("metadata.name", "`metadata.name`, the Helm release's name")
		r.Map(field+".version", "`metadata.version`")
		r.Map(field+".template.source.helm", fmt.Sprintf("`spec.contributes.kubernetes.helmReleases[0]`: chart `%s` (%s %s from %s)", chartDir, h.ChartName, h.ChartVersion, h.URL))
		if m.KubeVersion != "" {
			r.Map("the chart's kubeVersion", "`spec.kubernetesVersion`")
		}
		r.Notes = append(r.Notes, "The catalog's README.md lists what the definition as a whole mapped and could not map.")
		p.Report = r
		res.Packages = append(res.Packages, p)
		cat.Map(field, fmt.Sprintf("plugin %s %s (chart %s %s)", name, version, h.ChartName, h.ChartVersion))
		cat.Normalised = append(cat.Normalised, r.Normalised...)
	}
	kkpUnmapped(&cat, raw)
	cat.Note("Serve this directory over HTTPS and use it with `--catalog https://HOST/PATH/index.yaml` (or `spec.plugins.sources[].catalog` in cluster.yaml); `--plugin-dir NAME-VERSION.tgz` uses one version directly.")
	return res, nil
}

// kkpValues returns the release values of a definition's defaults: defaultValues
// or defaultValuesBlock, which KKP passes to Helm. String leaves holding a KKP
// template (`{{ .Cluster.… }}`) are left out and reported: KKP renders them with
// its own data, which kubeplug's templates do not have.
func kkpValues(r *Report, input string, dv map[string]any, block string) (v1alpha1.Values, error) {
	field := "spec.defaultValues"
	if block != "" {
		if len(dv) > 0 {
			return nil, fmt.Errorf("%s: spec.defaultValues and spec.defaultValuesBlock are both set; KKP refuses that too", input)
		}
		field = "spec.defaultValuesBlock"
		if err := yaml.Unmarshal([]byte(block), &dv); err != nil {
			return nil, fmt.Errorf("%s: spec.defaultValuesBlock: %w", input, err)
		}
	}
	if len(dv) == 0 {
		return nil, nil
	}
	out, _ := literal(r, field, dv).(map[string]any)
	r.Map(field, "`helmReleases[0].values` of every version")
	return out, nil
}

// literal returns v with the string leaves that hold a template left out, each
// reported under its path.
func literal(r *Report, field string, v any) any {
	switch t := v.(type) {
	case string:
		if usesData(t) {
			r.Unmap(field, "%q is a template of the source tool, rendered with data kubeplug does not have; left out, so the chart's default applies", t)
			return nil
		}
	case map[string]any:
		out := map[string]any{}
		for _, k := range sortedKeys(t) {
			if e := literal(r, field+"."+k, t[k]); e != nil || t[k] == nil {
				out[k] = e
			}
		}
		return out
	case []any:
		out := make([]any, 0, len(t))
		for i, e := range t {
			if e2 := literal(r, fmt.Sprintf("%s[%d]", field, i), e); e2 != nil || e == nil {
				out = append(out, e2)
			}
		}
		return out
	}
	return v
}

// usesData says whether a string is a template that reads data (a field, a
// variable, dot) or cannot be parsed. kubeplug renders string leaves as Go
// templates too, so a template that reads no data — {{ `{{.Release.Namespace}}` }},
// which hands Helm's tpl a template of its own — renders the same in both and is
// kept as it is.
func usesData(s string) bool {
	if !strings.Contains(s, "{{") {
		return false
	}
	t, err := template.New("").Funcs(sprig.TxtFuncMap()).Parse(s)
	if err != nil {
		return true
	}
	return readsData(t.Root)
}

// readsData walks a template's parse tree for a field, variable or dot.
//
// Branches: one case per kind of node of a template parse tree, as
// text/template/parse defines them.
func readsData(n parse.Node) bool {
	switch t := n.(type) {
	case nil:
		return false
	case *parse.FieldNode, *parse.VariableNode, *parse.DotNode, *parse.ChainNode:
		return true
	case *parse.ListNode:
		if t == nil {
			return false
		}
		for _, c := range t.Nodes {
			if readsData(c) {
				return true
			}
		}
	case *parse.ActionNode:
		return readsData(t.Pipe)
	case *parse.PipeNode:
		if t == nil {
			return false
		}
		if len(t.Decl) > 0 {
			return true
		}
		for _, c := range t.Cmds {
			if readsData(c) {
				return true
			}
		}
	case *parse.CommandNode:
		for _, a := range t.Args {
			if readsData(a) {
				return true
			}
		}
	case *parse.IfNode, *parse.RangeNode, *parse.WithNode, *parse.TemplateNode:
		return true
	}
	return false
}

// kkpUnmapped reports the definition's fields the import does not carry over.
func kkpUnmapped(r *Report, raw map[string]any) {
	if md, ok := raw["metadata"].(map[string]any); ok {
		for _, k := range sortedKeys(md) {
			if k != "name" {
				r.Unmap("metadata."+k, "metadata of the KKP object; a plugin has none")
			}
		}
	}
	spec, _ := raw["spec"].(map[string]any)
	why := map[string]string{
		"displayName":          "the name KKP's UI shows; the plugin's name is metadata.name",
		"documentationURL":     "a link for KKP's UI",
		"sourceURL":            "a link for KKP's UI",
		"logo":                 "an image for KKP's UI",
		"logoFormat":           "an image for KKP's UI",
		"defaultVersion":       "KKP's default choice; pin a version in cluster.yaml (spec.plugins.enabled[].version) instead",
		"enforced":             "KKP fleet policy; kubeplug installs what cluster.yaml enables",
		"default":              "KKP fleet policy; kubeplug installs what cluster.yaml enables",
		"selector":             "KKP fleet policy (datacenters); kubeplug installs what cluster.yaml enables",
		"defaultDeployOptions": "Helm's wait/atomic/timeout: kubeplug waits for readiness itself and rolls back through its release records",
	}
	for _, k := range sortedKeys(spec) {
		switch k {
		case "description", "method", "defaultValues", "defaultValuesBlock", "defaultNamespace", "versions":
			continue
		}
		w, ok := why[k]
		if !ok {
			w = "not an ApplicationDefinition field the import knows"
		}
		r.Unmap("spec."+k, "%s", w)
	}
	if vs, ok := spec["versions"].([]any); ok {
		for i, v := range vs {
			src := dig(v, "template", "source", "helm")
			for _, k := range sortedKeys(src) {
				switch k {
				case "url", "chartName", "chartVersion":
				default:
					r.Unmap(fmt.Sprintf("spec.versions[%d].template.source.helm.%s", i, k), "how KKP pulls the chart; the import took it from the charts directory")
				}
			}
			if tc := dig(v, "template"); tc["templateCredentials"] != nil {
				r.Unmap(fmt.Sprintf("spec.versions[%d].template.templateCredentials", i), "Secret references for KKP; the chart is vendored in the plugin")
			}
		}
	}
}

// dig returns the map at a path of keys in a generic tree, or nil.
func dig(v any, keys ...string) map[string]any {
	m, _ := v.(map[string]any)
	for _, k := range keys {
		m, _ = m[k].(map[string]any)
	}
	return m
}

// findChart returns the files of chart name at version from dir: NAME-VERSION.tgz,
// NAME-VERSION/ or NAME/ (whose Chart.yaml must then have that version), and
// where they were found.
func findChart(dir, name, version, url string) (map[string][]byte, string, error) {
	pull := fmt.Sprintf("helm pull %s --version %s -d CHARTS", pullRef(url, name), version)
	if dir == "" {
		return nil, "", fmt.Errorf("chart %s %s is not in the definition, only its repository; pull it (`%s`) and import with --charts CHARTS", name, version, pull)
	}
	for _, c := range []string{name + "-" + version + ".tgz", name + "-" + version, name} {
		p := filepath.Join(dir, c)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		tree, err := readTree(p)
		if err != nil {
			return nil, "", err
		}
		root, err := chartRoot(p, tree)
		if err != nil {
			return nil, "", err
		}
		if root != "." {
			tree = subtree(tree, root)
		}
		var m chartMeta
		if err := decodeLoose(p, tree["Chart.yaml"], &m); err == nil && c == name && m.Version != version {
			continue // another version of the chart
		}
		return tree, p, nil
	}
	return nil, "", fmt.Errorf("chart %s %s is not in %s (as %s-%s.tgz, %s-%s/ or %s/); pull it: `%s`", name, version, dir, name, version, name, version, name, strings.Replace(pull, "CHARTS", dir, 1))
}

// pullRef is what `helm pull` takes for a chart in the repository at url.
func pullRef(url, name string) string {
	if strings.HasPrefix(url, "oci://") {
		return strings.TrimSuffix(url, "/") + "/" + name
	}
	return name + " --repo " + url
}
