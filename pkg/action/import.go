package action

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/action/internal/importer"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// Import sources: the formats `kubeplug import` reads.
const (
	ImportHelm    = "helm"
	ImportKKP     = "kkp"
	ImportKubeAWS = "kube-aws"
	ImportKops    = "kops"
	ImportTKE     = "tke"
)

// ImportSources lists the import sources in the order help shows them.
var ImportSources = []string{ImportHelm, ImportKKP, ImportKubeAWS, ImportKops, ImportTKE}

// Import translates another tool's artifact into kubeplug plugins (see
// docs/import.md for what each source maps to).
type Import struct {
	cfg *Config
	// Dir is where the import's directories are created; the working directory
	// when empty. Each plugin is DIR/NAME; a catalog (KKP) is DIR/NAME too, with the
	// archives, index.yaml and README.
	Dir string
	// Namespace is where the imported Helm releases and namespaced objects go;
	// empty takes each source's default (the plugin's name for a chart, the
	// ApplicationDefinition's defaultNamespace for KKP).
	Namespace string
	// Charts is a directory of Helm charts for sources that name charts only by
	// repository and version (KKP): NAME-VERSION.tgz as `helm pull` writes them,
	// or unpacked as NAME-VERSION/ or NAME/.
	Charts string
	// Repo and Version fetch a Helm chart by reference instead of reading a
	// local one, as `helm pull` does: the input is oci://REGISTRY/REPO/CHART, or
	// with Repo (a Helm repository's URL) a chart's name in it; Version is a
	// version or a constraint (empty: the highest stable version).
	Repo, Version string
}

// NewImport returns an Import action.
func NewImport(cfg *Config) *Import { return &Import{cfg: cfg} }

// ImportResult is what [Import.Run] wrote.
type ImportResult struct {
	Source string `json:"source"`
	Input  string `json:"input"`
	// Plugins are the plugin directories written, or the archives of a catalog.
	Plugins []ImportedPlugin `json:"plugins"`
	// Catalog is the index.yaml written for a source with several versions.
	Catalog string `json:"catalog,omitempty"`
	// Unmapped counts the source fields listed as not mapped in the READMEs.
	Unmapped int `json:"unmapped"`
}

// ImportedPlugin is one plugin an import wrote.
type ImportedPlugin struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Path is the plugin's directory, or its archive in a catalog.
	Path string `json:"path"`
	// README is the generated README saying what was mapped where.
	README string `json:"readme"`
}

// importers are the importers by source.
var importers = map[string]func(string, importer.Options) (*importer.Result, error){
	ImportHelm:    importer.FromHelm,
	ImportKKP:     importer.FromKKP,
	ImportKubeAWS: importer.FromKubeAWS,
	ImportKops:    importer.FromKops,
	ImportTKE:     importer.FromTKE,
}

// Run imports input, in the format of src, and writes the result below Dir. Every
// plugin is checked as `plugin lint` checks it before anything is moved into
// place: an input that is not in the source's format, a path that exists, or a
// plugin that does not lint leaves nothing behind.
func (a *Import) Run(ctx context.Context, src, input string) (*ImportResult, diag.List) {
	var l diag.List
	from, ok := importers[src]
	if !ok {
		l.Errorf(input, 0, 0, "", "unknown import source %q: expected one of %s", src, strings.Join(ImportSources, ", "))
		return nil, l
	}
	if err := ctx.Err(); err != nil {
		l.Errorf(input, 0, 0, "", "%v", err)
		return nil, l
	}
	res, err := a.imported(ctx, from, src, input)
	if err != nil {
		l.Errorf(input, 0, 0, "", "cannot import: %v", err)
		return nil, l
	}
	dir := a.Dir
	if dir == "" {
		dir = "."
	}
	tops := topDirs(res)
	if checkFree(dir, tops, &l); l.HasFatal() {
		return nil, l
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		l.Errorf(dir, 0, 0, "", "cannot create the output directory: %v", unwrapPathErr(err))
		return nil, l
	}
	tmp, err := os.MkdirTemp(dir, ".kubeplug-import-")
	if err != nil {
		l.Errorf(dir, 0, 0, "", "cannot create the output directory: %v", unwrapPathErr(err))
		return nil, l
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	out := &ImportResult{Source: src, Input: input}
	if res.Catalog != "" {
		l = append(l, a.writeCatalog(ctx, tmp, res, out)...)
	} else {
		l = append(l, a.writePlugins(ctx, tmp, res, out)...)
	}
	if l.HasFatal() {
		return nil, l
	}
	if moveInPlace(tmp, dir, tops, out, &l); l.HasFatal() {
		return nil, l
	}
	a.cfg.logger().Debug("imported", "source", src, "input", input, "plugins", len(out.Plugins))
	return out, l
}

// imported is input imported in the format of src by from, or, for a Helm
// chart named by reference (oci://, or --repo), pulled first.
func (a *Import) imported(ctx context.Context, from func(string, importer.Options) (*importer.Result, error), src, input string) (*importer.Result, error) {
	opts := importer.Options{Namespace: a.Namespace, Charts: a.Charts}
	// A kube-aws binary's url is pinned by a digest the import computes:
	// downloaded once (bounded as render's downloads are) into the cache
	// render reads, so the render after the import downloads nothing.
	opts.Fetch = func(url string) (string, error) { return source.DefaultURLFiles().Fetch(ctx, url) }
	opts.Keep = func(data []byte) { _, _ = source.DefaultURLFiles().Keep(data) } // else render downloads it
	if byRef := a.Repo != "" || strings.HasPrefix(input, "oci://"); src == ImportHelm && byRef {
		return a.importChartRef(ctx, input, opts)
	}
	if a.Version != "" || a.Repo != "" {
		return nil, fmt.Errorf("--version and --repo name a chart by reference (oci://REGISTRY/REPO/CHART, or NAME --repo URL); %s is a local path", input)
	}
	return from(input, opts)
}

// checkFree refuses, in l, each of the directories tops an import creates in
// dir that exists already (or cannot be checked).
func checkFree(dir string, tops []string, l *diag.List) {
	for _, t := range tops {
		p := filepath.Join(dir, t)
		if _, err := os.Lstat(p); err == nil {
			l.Errorf(p, 0, 0, "", "already exists; remove it or import with another --dir")
		} else if !errors.Is(err, fs.ErrNotExist) {
			l.Errorf(p, 0, 0, "", "cannot check the output: %v", err)
		}
	}
}

// moveInPlace moves the directories tops of the import from tmp into dir,
// and makes out's paths, checked and linted in tmp, name them where they now
// are; an error goes to l.
func moveInPlace(tmp, dir string, tops []string, out *ImportResult, l *diag.List) {
	for _, t := range tops {
		if err := os.Rename(filepath.Join(tmp, t), filepath.Join(dir, t)); err != nil {
			l.Errorf(filepath.Join(dir, t), 0, 0, "", "cannot move the import into place: %v", err)
			return
		}
	}
	rel := func(p string) string {
		r, _ := filepath.Rel(tmp, p)
		return filepath.Join(dir, r)
	}
	for i := range out.Plugins {
		out.Plugins[i].Path, out.Plugins[i].README = rel(out.Plugins[i].Path), rel(out.Plugins[i].README)
	}
	if out.Catalog != "" {
		out.Catalog = rel(out.Catalog)
	}
}

// topDirs are the directories an import creates in the output directory.
func topDirs(res *importer.Result) []string {
	if res.Catalog != "" {
		return []string{res.Catalog}
	}
	var out []string
	for _, p := range res.Packages {
		top, _, _ := strings.Cut(filepath.ToSlash(p.Dir), "/")
		if !slices.Contains(out, top) {
			out = append(out, top)
		}
	}
	return out
}

// writePlugins writes each package as a directory below tmp and lints it.
func (a *Import) writePlugins(ctx context.Context, tmp string, res *importer.Result, out *ImportResult) diag.List {
	var l diag.List
	for _, p := range res.Packages {
		dir := filepath.Join(tmp, filepath.FromSlash(p.Dir))
		if err := writePackage(dir, p); err != nil {
			l.Errorf(dir, 0, 0, "", "%v", err)
			return l
		}
		_, ll := NewLint(a.cfg).Run(ctx, dir)
		l = append(l, relocate(ll, tmp, a.Dir)...)
		out.Unmapped += len(p.Report.Unmapped)
		out.Plugins = append(out.Plugins, ImportedPlugin{
			Name: p.Manifest.Metadata.Name, Version: p.Manifest.Metadata.Version,
			Path: dir, README: filepath.Join(dir, "README.md"),
		})
	}
	return l
}

// writeCatalog writes each package to a scratch directory, lints and packages it
// into the catalog directory, and writes the catalog's index.yaml and README.
func (a *Import) writeCatalog(ctx context.Context, tmp string, res *importer.Result, out *ImportResult) diag.List {
	var l diag.List
	cat := filepath.Join(tmp, filepath.FromSlash(res.Catalog))
	scratch := filepath.Join(tmp, ".packages")
	for _, p := range res.Packages {
		dir := filepath.Join(scratch, filepath.FromSlash(p.Dir))
		if err := writePackage(dir, p); err != nil {
			l.Errorf(dir, 0, 0, "", "%v", err)
			return l
		}
		_, ll := NewLint(a.cfg).Run(ctx, dir)
		l = append(l, relocate(ll, scratch, filepath.Join(a.Dir, res.Catalog))...)
		if l.HasFatal() {
			return l
		}
		name := p.Manifest.Metadata.Name + "-" + p.Manifest.Metadata.Version
		arc := filepath.Join(cat, name+".tgz")
		if err := os.MkdirAll(cat, 0o755); err != nil {
			l.Errorf(cat, 0, 0, "", "%v", unwrapPathErr(err))
			return l
		}
		pk := NewPackage(a.cfg)
		pk.Output = arc
		if _, pl := pk.Run(ctx, dir); pl.HasFatal() {
			return append(l, pl...)
		}
		out.Unmapped += len(p.Report.Unmapped)
		out.Plugins = append(out.Plugins, ImportedPlugin{
			Name: p.Manifest.Metadata.Name, Version: p.Manifest.Metadata.Version,
			Path: arc, README: filepath.Join(cat, "README.md"),
		})
	}
	if err := os.RemoveAll(scratch); err != nil {
		l.Errorf(scratch, 0, 0, "", "%v", err)
		return l
	}
	if res.Report != nil {
		if err := writeFiles(cat, map[string][]byte{"README.md": res.Report.README(res.Catalog)}); err != nil {
			l.Errorf(cat, 0, 0, "", "%v", err)
			return l
		}
		out.Unmapped += len(res.Report.Unmapped)
	}
	for _, p := range res.Packages {
		// The originals are the catalog's, not one version's: write them once.
		orig := map[string][]byte{}
		for f, data := range p.Files {
			if strings.HasPrefix(f, "original/") {
				orig[f] = data
			}
		}
		if err := writeFiles(cat, orig); err != nil {
			l.Errorf(cat, 0, 0, "", "%v", err)
			return l
		}
	}
	ci := NewCatalogIndex(a.cfg)
	x, file, cl := ci.Run(ctx, cat)
	l = append(l, cl...)
	if x != nil {
		out.Catalog = file
	}
	return l
}

// writePackage writes a package's plugin.yaml, README.md and files into dir.
func writePackage(dir string, p *importer.Package) error {
	m, err := yaml.Marshal(p.Manifest)
	if err != nil {
		return fmt.Errorf("encode plugin.yaml: %w", err)
	}
	header := fmt.Sprintf("# Imported by kubeplug import from %s.\n# README.md says what was mapped where and what was not.\n", strings.ReplaceAll(p.Report.Source, "`", ""))
	files := map[string][]byte{
		plugin.ManifestFile: append([]byte(header), m...),
		"README.md":         p.Report.README(p.Manifest.Metadata.Name + " " + p.Manifest.Metadata.Version),
	}
	for f, data := range p.Files {
		if _, dup := files[f]; dup {
			return fmt.Errorf("the import would write %s twice", f)
		}
		files[f] = data
	}
	return writeFiles(dir, files)
}

// writeFiles writes files by slash path below dir.
func writeFiles(dir string, files map[string][]byte) error {
	for f, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", f, unwrapPathErr(err))
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(f, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			return fmt.Errorf("write %s: %w", f, unwrapPathErr(err))
		}
	}
	return nil
}

// relocate names the files of diagnostics found in the scratch copy as they are
// (or would have been) in the output directory out.
func relocate(l diag.List, scratch, out string) diag.List {
	for i := range l {
		f := l[i].File
		if f == "" {
			continue
		}
		abs, err := filepath.Abs(f)
		if err != nil {
			continue
		}
		if r, err := filepath.Rel(scratch, abs); err == nil && !strings.HasPrefix(r, "..") {
			l[i].File = filepath.Join(out, r)
		}
	}
	return l
}

// importChartRef fetches the Helm chart input names by reference — an OCI chart,
// or the chart of that name in a.Repo — with the engine's chart fetching
// (bounded, checked against the digest its source announces, kept in the cache),
// and imports the archive as a packaged chart.
func (a *Import) importChartRef(ctx context.Context, input string, o importer.Options) (*importer.Result, error) {
	version := a.Version
	if version == "" {
		version = "*" // as helm pull: the highest version that is not a prerelease
	}
	ref := source.ChartRef{Chart: input, Version: version}
	if a.Repo != "" {
		if strings.Contains(input, "/") {
			return nil, fmt.Errorf("with --repo, give the chart's name in the repository, not %q", input)
		}
		ref.Repo = strings.TrimSuffix(a.Repo, "/")
	}
	if ref.Name() == "" {
		return nil, fmt.Errorf("%s: no chart name", input)
	}
	f := &source.ChartFetcher{Cache: source.DefaultCache()}
	a.cfg.logger().Debug("fetching chart", "chart", ref.String())
	ch, err := f.Fetch(ctx, ref, nil)
	if err != nil {
		return nil, err
	}
	return importer.FromHelmFetched(importer.FetchedChart{
		Ref: input, Repo: ref.Repo, Asked: version, Version: ch.Version,
		Name: ch.Name, Digest: ch.Digest, Archive: ch.Archive,
	}, o)
}
