package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/ignore"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/model"
)

// maxChartSize bounds what a chart directory may hold, as Helm bounds archives.
var maxChartSize = archive.MaxDecompressedChartSize

// helmRelease renders a release the way `helm template` does, through the Helm SDK:
// an install in client-only dry-run mode for the cluster's Kubernetes version, with
// CRDs and hooks (but not test hooks) included. The objects come back in Helm's
// install order.
func (r *renderer) helmRelease(ctx context.Context, h model.HelmRelease) ([]*kubeObject, error) {
	chrt, err := r.loadChart(h)
	if err != nil {
		return nil, err
	}
	kv, err := common.ParseKubeVersion("v" + r.version)
	if err != nil {
		return nil, fmt.Errorf("parsing Kubernetes version: %w", err)
	}
	values, err := copyValues(h.Values)
	if err != nil {
		return nil, fmt.Errorf("copying values: %w", err)
	}

	// Helm logs through the configuration's logger; a render stays quiet and never
	// risks printing values.
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler))
	// Keys and random strings a chart generates are tokens in what render shows.
	cfg.CustomTemplateFuncs = sealedGenerators()
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = h.Name
	install.Namespace = h.Namespace
	install.Replace = true // no release store to check the name against
	install.IncludeCRDs = true
	install.KubeVersion = kv
	rel, err := install.RunWithContext(ctx, chrt, values)
	if err != nil {
		return nil, err
	}
	rv, ok := rel.(*releasev1.Release)
	if !ok {
		return nil, fmt.Errorf("unexpected release type %T", rel)
	}

	var objs []*kubeObject
	src := "helm release " + h.Namespace + "/" + h.Name + ", "
	split := releaseutil.SplitManifests(rv.Manifest)
	keys := make([]string, 0, len(split))
	for k := range split {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	for _, k := range keys {
		o, err := helmObject(h, src, split[k], "")
		if err != nil {
			return nil, err
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	for _, hk := range rv.Hooks {
		if slices.Contains(hk.Events, releasev1.HookTest) {
			continue
		}
		o, err := helmObject(h, src+"hook ", hk.Manifest, hk.Path)
		if err != nil {
			return nil, err
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs, nil
}

// helmObject turns one rendered document into an object; documents holding only
// comments yield nil. source is taken from Helm's "# Source:" line unless given.
func helmObject(h model.HelmRelease, prefix, doc, source string) (*kubeObject, error) {
	if source == "" {
		for line := range strings.Lines(doc) {
			if s, ok := strings.CutPrefix(line, "# Source: "); ok {
				source = strings.TrimSpace(s)
				break
			}
		}
	}
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		return nil, fmt.Errorf("parsing rendered %s: %w", source, err)
	}
	j = bytes.TrimSpace(j)
	if bytes.Equal(j, []byte("null")) || len(j) == 0 {
		return nil, nil
	}
	if j[0] != '{' {
		return nil, fmt.Errorf("rendered %s is not an object", source)
	}
	o := newKubeObject(h.By, j, sourceComment(prefix+source))
	o.releaseNamespace = h.Namespace
	return o, nil
}

// loadChart loads a release's chart from its plugin's package: a directory, or a
// packaged chart (.tgz). A dependency Chart.yaml declares but charts/ lacks is an
// error naming both, as `helm template` refuses such a chart: rendering without it
// would silently drop the subchart's objects.
func (r *renderer) loadChart(h model.HelmRelease) (*chartv2.Chart, error) {
	if h.IsRef() {
		return r.loadRemoteChart(h)
	}
	if r.in.Charts == nil {
		return nil, errors.New("the render has no access to plugin packages")
	}
	pkg := r.in.Charts(h.By)
	if pkg == nil {
		return nil, fmt.Errorf("plugin %s has no package files", h.By)
	}
	chrt, err := LoadChart(pkg, h.Chart, r.fetchDependency(h))
	if err != nil {
		return nil, err
	}
	return chrt, nil
}

// fetchDependency is how h's chart gets a dependency its charts/ lacks: from
// the caller (Input.ChartDependency), which fetched it; nil when it fetches none.
func (r *renderer) fetchDependency(h model.HelmRelease) FetchDependency {
	if r.in.ChartDependency == nil {
		return nil
	}
	return func(d *chartv2.Dependency) ([]byte, error) { return r.in.ChartDependency(h, d) }
}

// loadRemoteChart loads a release's chart by reference from the archive the
// caller fetched, with the checks of a packaged chart in the package.
func (r *renderer) loadRemoteChart(h model.HelmRelease) (*chartv2.Chart, error) {
	if r.in.RemoteChart == nil {
		return nil, fmt.Errorf("chart %s is named by reference, and this command does not fetch charts", h.ChartRef())
	}
	data, err := r.in.RemoteChart(h)
	if err != nil {
		return nil, err
	}
	chrt, err := LoadChartArchive(data, r.fetchDependency(h))
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", h.ChartRef(), err)
	}
	return chrt, nil
}

// LoadChartArchive loads a packaged chart from its bytes, as LoadChart loads a
// .tgz in a package, dependencies checked.
func LoadChartArchive(data []byte, fetch FetchDependency) (*chartv2.Chart, error) {
	if int64(len(data)) > maxChartSize {
		return nil, fmt.Errorf("loading chart archive: archive is larger than %d bytes", maxChartSize)
	}
	chrt, err := readArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("loading chart archive: %w", err)
	}
	if err := resolveDependencies(chrt, nil, fetch); err != nil {
		return nil, err
	}
	return chrt, nil
}

// LoadChart loads the chart at ref inside fsys, a directory or a packaged chart
// (.tgz), bounded in size as Helm bounds archives, with every dependency its
// Chart.yaml (and each subchart's) declares: in charts/, or else fetched with
// fetch (nil: an error naming the missing dependency).
func LoadChart(fsys fs.FS, ref string, fetch FetchDependency) (*chartv2.Chart, error) {
	name := path.Clean(strings.TrimPrefix(ref, "./"))
	if !fs.ValidPath(name) {
		return nil, fmt.Errorf("chart %q must be a relative path inside the plugin's package", ref)
	}
	fi, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("opening chart %s: %w", name, err)
	}
	var chrt *chartv2.Chart
	if fi.IsDir() {
		sub, err := fs.Sub(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("opening chart directory %s: %w", name, err)
		}
		files, err := chartFiles(sub)
		if err != nil {
			return nil, fmt.Errorf("reading chart directory %s: %w", name, err)
		}
		if chrt, err = loader.LoadFiles(files); err != nil {
			return nil, fmt.Errorf("loading chart %s: %w", name, err)
		}
	} else {
		if chrt, err = loadArchive(fsys, name, fi.Size()); err != nil {
			return nil, fmt.Errorf("loading chart archive %s: %w", name, err)
		}
	}
	if err := resolveDependencies(chrt, nil, fetch); err != nil {
		return nil, fmt.Errorf("chart %s: %w", name, err)
	}
	return chrt, nil
}

// loadArchive loads a packaged chart: a gzipped tar no larger than Helm allows,
// whose paths Helm's archive loader checks (no absolute or parent paths).
func loadArchive(fsys fs.FS, name string, size int64) (*chartv2.Chart, error) {
	if size > maxChartSize {
		return nil, fmt.Errorf("archive is larger than %d bytes", maxChartSize)
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readArchive(f)
}

// readArchive reads a chart archive through Helm's archive loader.
func readArchive(r io.Reader) (*chartv2.Chart, error) {
	files, err := archive.LoadArchiveFiles(io.LimitReader(r, maxChartSize))
	if err != nil {
		return nil, err
	}
	for _, bf := range files {
		bf.ModTime = time.Time{} // nothing rendered may depend on when the archive was packed
	}
	return loader.LoadFiles(files)
}

// FetchDependency returns the archive of a chart dependency that a chart's
// charts/ does not hold: dep names it as Chart.yaml declares it, with the exact
// version Chart.lock gives when there is one. It is only asked for dependencies
// whose repository is a Helm repository (https://, http:// to loopback) or an
// OCI registry (oci://).
type FetchDependency func(dep *chartv2.Dependency) ([]byte, error)

// fetchable reports whether a dependency's repository is one kubeplug fetches
// from: not file://, not an @alias of helm's repository list, not empty.
func fetchable(d *chartv2.Dependency) bool {
	return strings.HasPrefix(d.Repository, "https://") || strings.HasPrefix(d.Repository, "http://") || strings.HasPrefix(d.Repository, "oci://")
}

// dependencyLabel names a dependency: its name, version and repository.
func dependencyLabel(d *chartv2.Dependency) string {
	m := d.Name
	if d.Version != "" {
		m += " " + d.Version
	}
	if d.Repository != "" {
		m += " from " + d.Repository
	}
	return m
}

// fetchDependency fetches the dependency d of chart c (at the exact version
// of c's Chart.lock when it pins one) and loads its archive; an error names
// the chart (in) and the dependency.
func fetchDependency(c *chartv2.Chart, d *chartv2.Dependency, fetch FetchDependency, in string) (*chartv2.Chart, error) {
	dep := *d
	if c.Lock != nil {
		for _, l := range c.Lock.Dependencies {
			if l != nil && l.Name == d.Name && l.Repository == d.Repository && l.Version != "" {
				dep.Version = l.Version // Chart.lock's exact version
			}
		}
	}
	m := dependencyLabel(d)
	data, err := fetch(&dep)
	if err != nil {
		return nil, fmt.Errorf("%s depends on %s: %w", in, m, err)
	}
	sub, err := readArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s depends on %s: loading its archive: %w", in, m, err)
	}
	if sub.Name() != d.Name {
		return nil, fmt.Errorf("%s depends on %s, but the fetched archive holds chart %s", in, m, sub.Name())
	}
	return sub, nil
}

// resolveDependencies completes a chart, and each subchart, with the
// dependencies its Chart.yaml declares and its charts/ lacks, fetched with
// fetch (nil fetches nothing); a dependency that cannot be fetched is an error
// naming the chart and the dependency, as `helm template` refuses such a chart,
// since rendering without it would silently drop its objects. A chart that
// depends, through fetched charts, on itself is an error naming the chain.
// chain names the enclosing charts.
func resolveDependencies(c *chartv2.Chart, chain []string, fetch FetchDependency) error {
	where := c.Name() + " " + c.Metadata.Version
	for _, a := range chain {
		if name, _, _ := strings.Cut(a, " "); name == c.Name() {
			return fmt.Errorf("dependency cycle: %s -> %s", strings.Join(chain, " -> "), where)
		}
	}
	chain = append(slices.Clone(chain), where)
	in := "chart " + strings.Join(chain, " > ")
	var missing []string
	for _, d := range c.Metadata.Dependencies {
		if d == nil || slices.ContainsFunc(c.Dependencies(), func(s *chartv2.Chart) bool { return s.Name() == d.Name }) {
			continue
		}
		if fetch == nil || !fetchable(d) {
			missing = append(missing, dependencyLabel(d))
			continue
		}
		sub, err := fetchDependency(c, d, fetch, in)
		if err != nil {
			return err
		}
		c.AddDependency(sub)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s depends on %s, which its charts/ directory does not hold (vendor it with `helm dependency build`, or give it an https:// or oci:// repository)", in, strings.Join(missing, ", "))
	}
	for _, s := range c.Dependencies() {
		if err := resolveDependencies(s, chain, fetch); err != nil {
			return err
		}
	}
	return nil
}

// chartFiles reads a chart directory the way Helm's directory loader does: honouring
// .helmignore, refusing irregular files, and bounded in size.
func chartFiles(fsys fs.FS) ([]*archive.BufferedFile, error) {
	rules := ignore.Empty()
	if b, err := fs.ReadFile(fsys, ignore.HelmIgnore); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(b)); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", ignore.HelmIgnore, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", ignore.HelmIgnore, err)
	}
	rules.AddDefaults()
	var files []*archive.BufferedFile
	var total int64
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if rules.Ignore(name, fi) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", name)
		}
		if total += fi.Size(); total > maxChartSize {
			return fmt.Errorf("chart is larger than %d bytes", maxChartSize)
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		// ModTime stays zero: nothing rendered may depend on when files were touched.
		files = append(files, &archive.BufferedFile{Name: name, Data: bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))})
		return nil
	})
	return files, err
}

// copyValues deep-copies values so that Helm's coalescing cannot change the model.
func copyValues(v map[string]any) (map[string]any, error) {
	if v == nil {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}
