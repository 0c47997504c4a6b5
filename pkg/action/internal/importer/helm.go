package importer

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

// Options are what the user may choose about an import.
type Options struct {
	// Namespace is where Helm releases and namespaced objects go; each importer
	// says its default (for a Helm chart, the plugin's name).
	Namespace string
	// Charts is a directory of Helm charts (NAME-VERSION.tgz as `helm pull`
	// writes them, or unpacked) for sources that name charts only by repository
	// and version (KKP).
	Charts string
	// Fetch downloads a URL once and returns the hex SHA-256 of what it
	// serves: the digest a kube-aws type: binary file's url is pinned by when
	// the plugin directory does not hold kube-aws's own download of it. Nil
	// downloads nothing (such a file is reported, not mapped).
	Fetch func(url string) (string, error)
	// Keep keeps the bytes a url was pinned by when the plugin directory held
	// them (kube-aws's download), where render looks for the url's file; nil
	// keeps nothing.
	Keep func(data []byte)
}

// chartMeta is the part of Chart.yaml the Helm importer reads; the rest stays in
// the chart, which is copied whole.
type chartMeta struct {
	APIVersion   string `json:"apiVersion"`
	Name         string `json:"name"`
	Version      string `json:"version"`
	Description  string `json:"description"`
	KubeVersion  string `json:"kubeVersion"`
	Type         string `json:"type"`
	Deprecated   bool   `json:"deprecated"`
	AppVersion   string `json:"appVersion"`
	Dependencies []struct {
		Name       string `json:"name"`
		Version    string `json:"version"`
		Repository string `json:"repository"`
		Alias      string `json:"alias"`
	} `json:"dependencies"`
}

// FromHelm imports a Helm chart — a directory holding Chart.yaml or a packaged
// chart (.tgz, as `helm package` and `helm pull` write) — as one plugin that
// installs it as a Helm release. The chart is copied whole into
// charts/NAME of the package, so the chart's own values.yaml, schema, templates
// and vendored dependencies are what Helm reads, unchanged.
func FromHelm(input string, o Options) (*Result, error) {
	tree, err := readTree(input)
	if err != nil {
		return nil, err
	}
	var r Report
	r.Source = fmt.Sprintf("the Helm chart `%s`", base(input))
	return helmResult(&r, input, tree, o)
}

// FetchedChart is a Helm chart fetched by reference (`oci://…` or a chart of a
// Helm repository), already checked against the digest its source announced.
type FetchedChart struct {
	// Ref is the reference as the user gave it: oci://REGISTRY/REPO/CHART, or
	// the chart's name in Repo.
	Ref string
	// Repo is the Helm repository's URL; empty for an OCI chart.
	Repo string
	// Asked is the version or constraint asked for; Version is what it resolved to.
	Asked, Version string
	// Name is the chart's name.
	Name string
	// Digest is the archive's digest, "sha256:HEX".
	Digest string
	// Archive is the packaged chart (.tgz).
	Archive []byte
}

// Source is where the chart came from: the repository URL and the chart's name,
// or the OCI reference.
func (c FetchedChart) Source() string {
	if c.Repo != "" {
		return strings.TrimSuffix(c.Repo, "/") + "/" + c.Name
	}
	return c.Ref
}

// FromHelmFetched imports a chart fetched by reference exactly as [FromHelm]
// imports a packaged chart, and records in the README where it came from: the
// URL, the version (and the constraint it met) and the archive's digest.
func FromHelmFetched(c FetchedChart, o Options) (*Result, error) {
	label := fmt.Sprintf("%s-%s.tgz", c.Name, c.Version)
	tree, err := unpack(c.Archive)
	if err != nil {
		return nil, fmt.Errorf("chart %s %s from %s: %w", c.Name, c.Version, c.Source(), err)
	}
	var r Report
	r.Source = fmt.Sprintf("the Helm chart `%s` %s fetched from `%s` (archive digest `%s`)", c.Name, c.Version, c.Source(), c.Digest)
	r.Note("Fetched: chart `%s` version `%s` (asked for `%s`) from `%s`, archive `%s`, checked against the digest the source announced. Import it again with `--version %s` for the same chart.",
		c.Name, c.Version, c.Asked, c.Source(), c.Digest, c.Version)
	return helmResult(&r, label, tree, o)
}

// helmResult makes the result of one chart's files: tree is the chart, at its
// root or in one top-level directory as a packaged chart holds it; input names
// it in errors.
func helmResult(r *Report, input string, tree map[string][]byte, o Options) (*Result, error) {
	root, err := chartRoot(input, tree)
	if err != nil {
		return nil, err
	}
	chart := tree
	if root != "." {
		chart = subtree(tree, root)
	}
	p, err := helmPackage(r, input, chart, o)
	if err != nil {
		return nil, err
	}
	p.Report = *r
	return &Result{Packages: []*Package{p}}, nil
}

// chartRoot finds the chart in tree: the root when it holds Chart.yaml, else the
// one top-level directory that does (a packaged chart is NAME/Chart.yaml).
func chartRoot(input string, tree map[string][]byte) (string, error) {
	if _, ok := tree["Chart.yaml"]; ok {
		return ".", nil
	}
	var roots []string
	for p := range tree {
		if dir, file := path.Split(p); file == "Chart.yaml" && strings.Count(dir, "/") == 1 {
			roots = append(roots, strings.TrimSuffix(dir, "/"))
		}
	}
	slices.Sort(roots)
	switch len(roots) {
	case 0:
		return "", fmt.Errorf("%s: %w: no Chart.yaml at its top or in one top-level directory; expected a Helm chart directory or a packaged chart (.tgz)", input, ErrFormat)
	case 1:
		return roots[0], nil
	}
	return "", fmt.Errorf("%s: %w: %d charts (%s); expected one", input, ErrFormat, len(roots), strings.Join(roots, ", "))
}

// helmPackage makes the plugin of one chart's files.
func helmPackage(r *Report, input string, chart map[string][]byte, o Options) (*Package, error) {
	file := path.Join(base(input), "Chart.yaml")
	m, raw, err := readChart(file, chart)
	if err != nil {
		return nil, err
	}
	name, err := Name(r, "Chart.yaml name", m.Name, 53)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	version, err := Version(r, "Chart.yaml version", m.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	p := newPackage(name, name, version, m.Description)
	if p.Manifest.Metadata.Description == "" {
		p.Manifest.Metadata.Description = "The Helm chart " + m.Name + " " + m.Version
	}
	chartDir := "charts/" + name
	for f, data := range chart {
		p.Files[chartDir+"/"+f] = data
	}
	ns := o.Namespace
	if ns == "" {
		ns = name
	}
	p.kubernetes().HelmReleases = []v1alpha1.HelmRelease{{Name: name, Chart: chartDir, Namespace: ns}}
	r.Original = append(r.Original, fmt.Sprintf("`%s/`: the chart, copied whole; Helm installs it from there", chartDir))
	r.Map("name", "`metadata.name`, the Helm release's name")
	r.Map("version", "`metadata.version`")
	if m.Description != "" {
		r.Map("description", "`metadata.description` (its first line)")
	}
	if kv := strings.TrimSpace(m.KubeVersion); kv != "" {
		p.Manifest.Spec.KubernetesVersion = kv
		r.Map("kubeVersion", "`spec.kubernetesVersion`")
	}
	r.Map("templates/, values.yaml, values.schema.json, crds/, charts/", fmt.Sprintf("`spec.contributes.kubernetes.helmReleases[0]`: chart `%s`, release `%s` in namespace `%s`", chartDir, name, ns))
	if _, ok := chart["values.yaml"]; ok {
		r.Note("The release passes no values: the chart's own values.yaml applies. Set `helmReleases[0].values` in plugin.yaml to override some (string leaves are templates over the plugin's values).")
	}
	if len(m.Dependencies) > 0 {
		r.Map("dependencies, Chart.lock", "vendored in `"+chartDir+"/charts/`, installed with the chart")
	}
	for _, k := range sortedKeys(raw) {
		switch k {
		case "apiVersion", "name", "version", "description", "kubeVersion", "dependencies", "type":
		case "appVersion", "home", "sources", "keywords", "maintainers", "icon", "annotations":
			r.Map(k, "kept in the chart's Chart.yaml (Helm metadata kubeplug does not read)")
		case "deprecated":
			if m.Deprecated {
				r.Note("The chart is marked deprecated.")
			}
			r.Map(k, "kept in the chart's Chart.yaml; noted here")
		default:
			r.Unmap(k, "not a Chart.yaml field kubeplug or Helm's chart API v2 knows")
		}
	}
	return p, nil
}

// readChart reads a chart's Chart.yaml (file names it in errors) and refuses
// what Helm would refuse to install: a library chart, a kubeVersion it cannot
// read, dependencies not vendored in charts/. It returns the fields the importers
// read and the whole document.
func readChart(file string, chart map[string][]byte) (chartMeta, map[string]any, error) {
	var m chartMeta
	data, ok := chart["Chart.yaml"]
	if !ok {
		return m, nil, fmt.Errorf("%s: %w: no such file in the chart", file, ErrFormat)
	}
	raw, err := decodeMap(file, data)
	if err != nil {
		return m, nil, err
	}
	if err := decodeLoose(file, data, &m); err != nil {
		return m, nil, err
	}
	if m.Name == "" || m.Version == "" {
		return m, nil, fmt.Errorf("%s: %w: a Helm chart's Chart.yaml has name and version", file, ErrFormat)
	}
	if m.Type == "library" {
		return m, nil, fmt.Errorf("%s: chart %s is a library chart (type: library); only application charts can be installed as a release", file, m.Name)
	}
	if kv := strings.TrimSpace(m.KubeVersion); kv != "" {
		// Helm refuses to install a chart whose kubeVersion it cannot read, so
		// the import does too rather than write a plugin that cannot install.
		if _, err := semver.NewConstraint(kv); err != nil {
			return m, nil, fmt.Errorf("%s: kubeVersion %q is not a semver constraint (Helm refuses to install the chart): %w", file, kv, err)
		}
	}
	if err := checkDependencies(file, chart, m); err != nil {
		return m, nil, err
	}
	return m, raw, nil
}

// checkDependencies refuses a chart whose declared dependencies are not vendored
// in its charts/ directory: Helm refuses to install it, so the plugin would lint
// and then fail.
func checkDependencies(file string, chart map[string][]byte, m chartMeta) error {
	var missing []string
	for _, d := range m.Dependencies {
		if !vendored(chart, d.Name) {
			missing = append(missing, fmt.Sprintf("%s %s (%s)", d.Name, d.Version, d.Repository))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: dependencies not vendored in charts/: %s; run `helm dependency build` on the chart first", file, strings.Join(missing, ", "))
	}
	return nil
}

// vendored says whether the chart's charts/ directory holds a dependency, as a
// directory or an archive.
func vendored(chart map[string][]byte, name string) bool {
	for p := range chart {
		rest, ok := strings.CutPrefix(p, "charts/")
		if !ok {
			continue
		}
		if strings.HasPrefix(rest, name+"/") || (strings.HasPrefix(rest, name+"-") && strings.HasSuffix(rest, ".tgz") && !strings.Contains(rest, "/")) {
			return true
		}
	}
	return false
}
